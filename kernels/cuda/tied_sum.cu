// Element-wise sum of two gradient copies into both (tied_sum.hpp).
#include <algorithm>
#include <string>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/tied_sum.hpp"

namespace conveyor {
namespace {
using namespace cuda_detail;

// ----------------------------------------------------------------------------
// kernels

template <class G>
__global__ void sum_into_both_kernel(G* a, G* b, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    store_narrowed(a + i, widen(a[i]) + widen(b[i]));
    b[i] = a[i];
  }
}

constexpr int kThreads = 256;

template <class G>
void launch(G* a, G* b, std::int64_t n, cudaStream_t stream) {
  require(n >= 0, "sum_into_both", "negative n " + std::to_string(n));
  if (n == 0) return;
  sum_into_both_kernel<<<grid_stride_blocks(n, kThreads), kThreads, 0, stream>>>(a, b, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

// ----------------------------------------------------------------------------
// launchers

void sum_into_both(float* a, float* b, std::int64_t n, cudaStream_t stream) {
  launch(a, b, n, stream);
}
void sum_into_both(bf16* a, bf16* b, std::int64_t n, cudaStream_t stream) {
  launch(a, b, n, stream);
}

}  // namespace conveyor
