// The stand-alone residual add; see residual.hpp.
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/model/residual.hpp"

namespace conveyor {
namespace {
using namespace cuda_detail;

constexpr int kThreads = 256;

// ----------------------------------------------------------------------------
// kernels

// Grid-stride, one element per thread and step (memory bound; used once per stage).
__global__ void residual_kernel(bf16* out, const bf16* a, const bf16* b, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    out[i] = to_bf16(to_float(a[i]) + to_float(b[i]));
}

}  // namespace

// ----------------------------------------------------------------------------
// launchers

void residual_forward(bf16* out, const bf16* a, const bf16* b, std::int64_t n,
                      cudaStream_t stream) {
  require(n >= 0, "residual_forward", "negative n " + std::to_string(n));
  if (n == 0) return;
  const unsigned grid =
      static_cast<unsigned>(std::min<std::int64_t>(ceil_div(n, kThreads), 65536));
  residual_kernel<<<grid, kThreads, 0, stream>>>(out, a, b, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace conveyor
