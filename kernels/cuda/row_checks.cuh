#pragma once
// The argument check of the row-wise norm kernels (layernorm.cu, rmsnorm.cu): N rows of C.
#include <string>

#include "kernels/cuda/common.cuh"

namespace conveyor::cuda_detail {

inline void check_nc(const char* what, int N, int C) {
  require(N > 0 && C > 0, what,
          "N and C must be positive, got " + std::to_string(N) + ", " + std::to_string(C));
}

}  // namespace conveyor::cuda_detail
