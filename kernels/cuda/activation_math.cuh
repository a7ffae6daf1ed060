#pragma once
// The element-wise activations' math in fp32, written once: the stand-alone kernels
// (gelu.cu, swiglu.cu) and the ones that also cast their output to FP8 in the same pass
// (fp8_fused_cast.cu) call these, so both round the same fp32 value to bf16 and a fused
// kernel writes the very bits the stand-alone one does (tested bit for bit).
#include "kernels/cuda/common.cuh"

namespace conveyor::cuda_detail {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluC = 0.044715f;

/// GELU, tanh approximation (kernels/cpu/gelu.hpp).
__device__ __forceinline__ float gelu_value(float x) {
  return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kGeluC * x * x * x)));
}

/// dy · gelu'(x).
__device__ __forceinline__ float gelu_input_grad(float x, float dy) {
  const float th = tanhf(kSqrt2OverPi * (x + kGeluC * x * x * x));
  const float sech2 = 1.0f - th * th;
  const float local =
      0.5f * (1.0f + th) + 0.5f * x * sech2 * kSqrt2OverPi * (1.0f + 3.0f * kGeluC * x * x);
  return local * dy;
}

/// sigmoid(g) = 1 / (1 + exp(-g)); a very negative g gives exp(-g) = inf and 0, the limit.
__device__ __forceinline__ float sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

/// SwiGLU: silu(gate) · up (kernels/cpu/swiglu.hpp).
__device__ __forceinline__ float swiglu_value(float g, float u) { return (g * sigmoid(g)) * u; }

/// The gradients of silu(g) · u for dy: d gate (silu'(g) = sigmoid(g) (1 + g (1 - sigmoid(g))))
/// and d up.
__device__ __forceinline__ float swiglu_gate_grad(float g, float u, float dy) {
  const float sig = sigmoid(g);
  return dy * u * (sig * (1.0f + g * (1.0f - sig)));
}
__device__ __forceinline__ float swiglu_up_grad(float g, float dy) { return dy * (g * sigmoid(g)); }

}  // namespace conveyor::cuda_detail
