// Invariant: outputs are written with =.
#include <algorithm>

#include "kernels/cuda/cast.hpp"
#include "kernels/cuda/common.cuh"

namespace conveyor {
namespace {
using namespace cuda_detail;

// ----------------------------------------------------------------------------
// kernels

__global__ void cast_f32_to_bf16_kernel(bf16* out, const float* inp, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    out[i] = to_bf16(inp[i]);
}

__global__ void cast_bf16_to_f32_kernel(float* out, const bf16* inp, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    out[i] = to_float(inp[i]);
}

constexpr int kThreads = 256;
unsigned grid_for(std::int64_t n) { return grid_stride_blocks(n, kThreads); }

}  // namespace

// ----------------------------------------------------------------------------
// launchers

void cast_f32_to_bf16(bf16* out, const float* inp, std::int64_t n, cudaStream_t stream) {
  require(n >= 0, "cast_f32_to_bf16", "negative n " + std::to_string(n));
  if (n == 0) return;
  cast_f32_to_bf16_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, inp, n);
  CUDA_CHECK_LAUNCH();
}

void cast_bf16_to_f32(float* out, const bf16* inp, std::int64_t n, cudaStream_t stream) {
  require(n >= 0, "cast_bf16_to_f32", "negative n " + std::to_string(n));
  if (n == 0) return;
  cast_bf16_to_f32_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, inp, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace conveyor
