// GELU forward and backward, element-wise, fp32 math on bf16 storage.
#include <algorithm>

#include "kernels/cuda/activation_math.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gelu.hpp"

namespace conveyor {
namespace {
using namespace cuda_detail;

// ----------------------------------------------------------------------------
// kernels

__global__ void gelu_forward_kernel(bf16* out, const bf16* inp, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    out[i] = to_bf16(gelu_value(to_float(inp[i])));
  }
}

__global__ void gelu_backward_kernel(bf16* dinp, const bf16* dout, const bf16* inp,
                                     std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    dinp[i] = to_bf16(gelu_input_grad(to_float(inp[i]), to_float(dout[i])));
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
