#pragma once
// RMSNorm over the last dimension on the device (Llama's norm; kernels/cpu/rmsnorm.hpp),
// optionally fused with the residual add that precedes it:
//   residual = a + b (rounded to bf16);  out = residual * rstd * weight,
//   rstd = 1 / sqrt(mean(residual^2) + eps), in fp32 over the bf16 residual that is
// stored (so backward sees exactly what forward normalised). eps is the model's norm_eps.
// Invariant: the weight gradient (fp32, or bf16: optim.grad_dtype) is accumulated with +=
// (fp32 sums, one rounding per element for bf16); activations are written with =; the
// input gradient (bf16) is accumulated with += (the caller seeds it with the residual
// gradient), or written with = from a separate residual gradient (the _residual form).
// Backward is split as for LayerNorm: backward_input needs (inp, weight, rstd);
// backward_weight needs (inp, rstd) and the same dout and is a two-pass reduction over
// fixed chunks of rows (no atomics): deterministic.
// One warp per row, statistics as warp sums (xor butterflies: a fixed order).
#include "kernels/cuda/types.hpp"

namespace conveyor {

void rmsnorm_forward(bf16* out,           // (N, C)
                     float* rstd,         // (N)
                     const bf16* inp,     // (N, C)
                     const bf16* weight,  // (C)
                     float eps, int N, int C, cudaStream_t stream);

void residual_rmsnorm_forward(bf16* residual,      // (N, C) = a + b
                              bf16* out,           // (N, C)
                              float* rstd,         // (N)
                              const bf16* a,       // (N, C)
                              const bf16* b,       // (N, C)
                              const bf16* weight,  // (C)
                              float eps, int N, int C, cudaStream_t stream);

void rmsnorm_backward_input(bf16* dinp,          // (N, C) +=
                            const bf16* dout,    // (N, C)
                            const bf16* inp,     // (N, C) the normalised input (residual)
                            const bf16* weight,  // (C)
                            const float* rstd,   // (N)
                            int N, int C, cudaStream_t stream);

/// dinp = dresidual + the input gradient of rmsnorm_backward_input, in one pass (bitwise
/// what a copy of dresidual followed by rmsnorm_backward_input gives). dinp and dresidual
/// may not overlap unless equal.
void rmsnorm_backward_input_residual(bf16* dinp,             // (N, C) =
                                     const bf16* dresidual,  // (N, C)
                                     const bf16* dout,       // (N, C)
                                     const bf16* inp,        // (N, C)
                                     const bf16* weight,     // (C)
                                     const float* rstd,      // (N)
                                     int N, int C, cudaStream_t stream);

void rmsnorm_backward_weight(float* dweight,     // (C) +=
                             const bf16* dout,   // (N, C)
                             const bf16* inp,    // (N, C)
                             const float* rstd,  // (N)
                             int N, int C, cudaStream_t stream);
void rmsnorm_backward_weight(bf16* dweight,      // (C) +=
                             const bf16* dout,   // (N, C)
                             const bf16* inp,    // (N, C)
                             const float* rstd,  // (N)
                             int N, int C, cudaStream_t stream);

}  // namespace conveyor
