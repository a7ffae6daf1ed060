#pragma once
// Linear layers on the device through cuBLASLt, weights stored (out, in) like PyTorch:
// out = inp W^T + b. bf16 operands, fp32 accumulation (CUBLAS_COMPUTE_32F).
// Invariant: parameter gradients (fp32, or bf16 under optim.grad_dtype bf16) are
// accumulated with += (GEMM beta = 1); activations and the input gradient are written with =.
// Backward is split for zero-bubble schedules: backward_input needs (dout, W) only;
// backward_weight needs (dout, inp).
//
// GELU: linear_forward with a `pre_gelu` buffer computes out = gelu(inp W^T + b) and saves
// the pre-activation (epilogue GELU_AUX_BIAS); linear_backward_input with `pre_gelu`
// multiplies by gelu'(pre_gelu) (epilogue DGELU): that is the GELU which produced this
// layer's input, i.e. pass fc1's pre_gelu to fc2's backward_input to get d(fc1 output).
// set_gemm_gelu_fusion(false) runs the same maths as a plain GEMM plus the kernels of
// gelu.hpp instead (for testing the fused epilogues and as a fallback).
//
// Determinism (see gemm.cu): one algorithm per (device, shape, layout, epilogue, pointer
// alignment), chosen once as cuBLASLt's heuristic top-1 under fixed preferences (32 MiB
// workspace, split-K only with a separate reduction pass: reduction schemes NONE,
// COMPUTE_TYPE, OUTPUT_TYPE) and cached for the life of the process, so the same inputs
// give bitwise identical results on the same GPU model and library version.
#include "kernels/cuda/types.hpp"

namespace conveyor {

/// out = inp W^T + bias; with pre_gelu non-null: pre_gelu = inp W^T + bias, out = gelu(pre_gelu).
/// REQUIRES: IC and OC multiples of 8 (16-byte rows for the tensor cores).
void linear_forward(bf16* out,           // (N, OC)
                    bf16* pre_gelu,      // (N, OC) or null
                    const bf16* inp,     // (N, IC)
                    const bf16* weight,  // (OC, IC)
                    const bf16* bias,    // (OC) or null
                    int N, int IC, int OC, cudaStream_t stream);

/// dinp = dout W; with pre_gelu non-null: dinp = (dout W) * gelu'(pre_gelu).
void linear_backward_input(bf16* dinp,            // (N, IC) =
                           const bf16* dout,      // (N, OC)
                           const bf16* weight,    // (OC, IC)
                           const bf16* pre_gelu,  // (N, IC) or null
                           int N, int IC, int OC, cudaStream_t stream);

/// dweight += dout^T inp (fp32 output, beta = 1); dbias += column sums of dout (two-pass,
/// fixed chunks of rows, no atomics).
void linear_backward_weight(float* dweight,    // (OC, IC) +=
                            float* dbias,      // (OC) +=, or null
                            const bf16* dout,  // (N, OC)
                            const bf16* inp,   // (N, IC)
                            int N, int IC, int OC, cudaStream_t stream);
/// The same with bf16 gradients: the GEMM reads dweight as bf16 C (beta = 1), accumulates
/// in fp32 and rounds D to bf16 once; the bias sums are fp32 and round once when added.
void linear_backward_weight(bf16* dweight,     // (OC, IC) +=
                            bf16* dbias,       // (OC) +=, or null
                            const bf16* dout,  // (N, OC)
                            const bf16* inp,   // (N, IC)
                            int N, int IC, int OC, cudaStream_t stream);

/// dbias += the column sums of dout (N, OC) alone: linear_backward_weight's bias part, for
/// GEMMs that are not its own (fp8_gemm.hpp's).
void linear_backward_bias(float* dbias, const bf16* dout, int N, int OC, cudaStream_t stream);
void linear_backward_bias(bf16* dbias, const bf16* dout, int N, int OC, cudaStream_t stream);

/// Process-wide: fuse GELU into the GEMM epilogues (default true).
void set_gemm_gelu_fusion(bool fuse);
bool gemm_gelu_fusion();

/// Bytes of cuBLASLt workspace each (device, stream) pair holds.
inline constexpr std::size_t kGemmWorkspaceBytes = std::size_t{32} << 20;

}  // namespace conveyor
