// GELU forward and backward, element-wise, fp32 math on bf16 storage.
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gelu.hpp"

namespace conveyor {
namespace {
using namespace cuda_detail;

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluC = 0.044715f;

// ----------------------------------------------------------------------------
// kernels

__global__ void gelu_forward_kernel(bf16* out, const bf16* inp, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const float x = to_float(inp[i]);
    out[i] = to_bf16(0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kGeluC * x * x * x))));
  }
}

__global__ void gelu_backward_kernel(bf16* dinp, const bf16* dout, const bf16* inp,
                                     std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const float x = to_float(inp[i]);
    const float th = tanhf(kSqrt2OverPi * (x + kGeluC * x * x * x));
    const float sech2 = 1.0f - th * th;
    const float local =
        0.5f * (1.0f + th) + 0.5f * x * sech2 * kSqrt2OverPi * (1.0f + 3.0f * kGeluC * x * x);
    dinp[i] = to_bf16(local * to_float(dout[i]));
  }
}

constexpr int kThreads = 256;
unsigned grid_for(std::int64_t n) { return grid_stride_blocks(n, kThreads); }

}  // namespace

// ----------------------------------------------------------------------------
// launchers

void gelu_forward(bf16* out, const bf16* inp, std::int64_t n, cudaStream_t stream) {
  require(n >= 0, "gelu_forward", "negative n " + std::to_string(n));
  if (n == 0) return;
  gelu_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, inp, n);
  CUDA_CHECK_LAUNCH();
}

void gelu_backward_input(bf16* dinp, const bf16* dout, const bf16* inp, std::int64_t n,
                         cudaStream_t stream) {
  require(n >= 0, "gelu_backward_input", "negative n " + std::to_string(n));
  if (n == 0) return;
  gelu_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(dinp, dout, inp, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace conveyor
