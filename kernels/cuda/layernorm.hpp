#pragma once
// LayerNorm over the last dimension on the device, optionally fused with the residual add
// that precedes it (kernels/cpu/layernorm.hpp, kernels/cpu/residual.hpp):
//   residual = a + b (rounded to bf16);  out = (residual - mean) * rstd * weight + bias
// with rstd = 1 / sqrt(var + 1e-5), biased variance, statistics in fp32 over the bf16
// residual that is stored (so backward sees exactly what forward normalised).
// Invariant: parameter gradients (fp32, or bf16: optim.grad_dtype) are accumulated with +=
// (fp32 sums, one rounding per element for bf16); activations are written
// with =; the input gradient (bf16) is accumulated with += (the caller seeds it with the
// residual gradient, as on the CPU).
// Backward is split: backward_input needs (inp, weight, mean, rstd); backward_weight
// needs (inp, mean, rstd) and the same dout. backward_weight is a two-pass reduction over
// fixed chunks of rows (no atomics), so it is deterministic.
#include "kernels/cuda/types.hpp"

namespace conveyor {

void layernorm_forward(bf16* out,           // (N, C)
                       float* mean,         // (N)
                       float* rstd,         // (N)
                       const bf16* inp,     // (N, C)
                       const bf16* weight,  // (C)
                       const bf16* bias,    // (C)
                       int N, int C, cudaStream_t stream);

void residual_layernorm_forward(bf16* residual,      // (N, C) = a + b
                                bf16* out,           // (N, C)
                                float* mean,         // (N)
                                float* rstd,         // (N)
                                const bf16* a,       // (N, C)
                                const bf16* b,       // (N, C)
                                const bf16* weight,  // (C)
                                const bf16* bias,    // (C)
                                int N, int C, cudaStream_t stream);

void layernorm_backward_input(bf16* dinp,          // (N, C) +=
                              const bf16* dout,    // (N, C)
                              const bf16* inp,     // (N, C) the normalised input (residual)
                              const bf16* weight,  // (C)
                              const float* mean,   // (N)
                              const float* rstd,   // (N)
                              int N, int C, cudaStream_t stream);

/// dinp = dresidual + the input gradient of layernorm_backward_input: the gradient of a
/// residual stream that feeds both the LayerNorm and a skip connection, in one pass
/// (bitwise what a copy of dresidual followed by layernorm_backward_input gives).
/// dinp and dresidual may not overlap unless equal.
void layernorm_backward_input_residual(bf16* dinp,             // (N, C) =
                                       const bf16* dresidual,  // (N, C)
                                       const bf16* dout,       // (N, C)
                                       const bf16* inp,        // (N, C)
                                       const bf16* weight,     // (C)
                                       const float* mean,      // (N)
                                       const float* rstd,      // (N)
                                       int N, int C, cudaStream_t stream);

void layernorm_backward_weight(float* dweight,     // (C) +=
                               float* dbias,       // (C) +=
                               const bf16* dout,   // (N, C)
                               const bf16* inp,    // (N, C)
                               const float* mean,  // (N)
                               const float* rstd,  // (N)
                               int N, int C, cudaStream_t stream);
void layernorm_backward_weight(bf16* dweight,      // (C) +=
                               bf16* dbias,        // (C) +=
                               const bf16* dout,   // (N, C)
                               const bf16* inp,    // (N, C)
                               const float* mean,  // (N)
                               const float* rstd,  // (N)
                               int N, int C, cudaStream_t stream);

}  // namespace conveyor
