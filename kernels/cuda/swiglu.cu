// SwiGLU forward and input backward, element-wise; see swiglu.hpp.
#include <string>

#include "kernels/cuda/activation_math.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/swiglu.hpp"

namespace conveyor {
namespace {
using namespace cuda_detail;

constexpr int kThreads = 256;

// Output element k = (n, i) reads gate_up[n, i] (the gate) and gate_up[n, F + i] (up):
// the offset of the gate in the (N, 2F) rows.
__device__ __forceinline__ std::int64_t gate_at(std::int64_t k, std::int64_t F) {
  return (k / F) * 2 * F + k % F;
}

__global__ void swiglu_forward_kernel(bf16* out, const bf16* gate_up, std::int64_t N,
                                      std::int64_t F) {
  const std::int64_t n_out = N * F;
  for (std::int64_t k = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; k < n_out;
       k += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t at = gate_at(k, F);
    const float g = to_float(gate_up[at]), u = to_float(gate_up[at + F]);
    out[k] = to_bf16(swiglu_value(g, u));
  }
}

__global__ void swiglu_backward_kernel(bf16* dgate_up, const bf16* dout, const bf16* gate_up,
                                       std::int64_t N, std::int64_t F) {
  const std::int64_t n_out = N * F;
  for (std::int64_t k = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; k < n_out;
       k += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t at = gate_at(k, F);
    const float g = to_float(gate_up[at]), u = to_float(gate_up[at + F]);
    const float dy = to_float(dout[k]);
    dgate_up[at] = to_bf16(swiglu_gate_grad(g, u, dy));
    dgate_up[at + F] = to_bf16(swiglu_up_grad(g, dy));
  }
}

void check_nf(const char* what, std::int64_t N, std::int64_t F) {
  require(N >= 0 && F > 0, what,
          "N must not be negative and F must be positive, got " + std::to_string(N) + ", " +
              std::to_string(F));
}

}  // namespace

void swiglu_forward(bf16* out, const bf16* gate_up, std::int64_t N, std::int64_t F,
                    cudaStream_t stream) {
  check_nf("swiglu_forward", N, F);
  if (N == 0) return;
  swiglu_forward_kernel<<<grid_stride_blocks(N * F, kThreads), kThreads, 0, stream>>>(out, gate_up,
                                                                                      N, F);
  CUDA_CHECK_LAUNCH();
}

void swiglu_backward_input(bf16* dgate_up, const bf16* dout, const bf16* gate_up, std::int64_t N,
                           std::int64_t F, cudaStream_t stream) {
  check_nf("swiglu_backward_input", N, F);
  if (N == 0) return;
  swiglu_backward_kernel<<<grid_stride_blocks(N * F, kThreads), kThreads, 0, stream>>>(
      dgate_up, dout, gate_up, N, F);
  CUDA_CHECK_LAUNCH();
}

}  // namespace conveyor
