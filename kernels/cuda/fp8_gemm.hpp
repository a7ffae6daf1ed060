#pragma once
// The linear layers' three GEMMs with FP8 operands (precision.matmul: fp8, issue 43), bf16
// or fp32 results, fp32 accumulation, through cuBLASLt (lt_matmul.hpp). Weights are stored
// (out, in) like PyTorch, as in gemm.hpp; each FP8 operand comes with its dequantization
// scale, a device float (1 / the scale it was cast with: fp8_cast.hpp), which the GEMM
// multiplies in.
// Hopper's FP8 GEMMs take only the "TN" form (A transposed, B not, in column-major terms),
// so the backward GEMMs read transposed FP8 copies, which cast_transpose_to_fp8 makes in
// the pass that casts:
//   forward          out (N, OC)   = inp (N, IC)   · weight (OC, IC)^T
//   backward input   dinp (N, IC)  = dout (N, OC)  · weight_t (IC, OC)^T   (weight_t = W^T)
//   backward weight  dw (OC, IC)  += dout_t (OC, N) · inp_t (IC, N)^T      (the two transposed)
// E5M2 times E5M2 is not a form the hardware has: a gradient (E5M2) always meets an E4M3
// operand. REQUIRES: N, IC, OC multiples of 16 (16-byte rows of FP8).
#include <cstdint>

#include "kernels/cuda/fp8_cast.hpp"
#include "kernels/cuda/types.hpp"

namespace conveyor {

/// An FP8 tensor as a GEMM reads it: its bytes, format and dequantization scale (device).
struct Fp8Operand {
  const std::uint8_t* data = nullptr;
  Fp8Kind kind = Fp8Kind::e4m3;
  const float* dequant = nullptr;
};

void fp8_linear_forward(bf16* out,           // (N, OC) =
                        Fp8Operand inp,      // (N, IC)
                        Fp8Operand weight,   // (OC, IC)
                        const bf16* bias,    // (OC) or null
                        int N, int IC, int OC, cudaStream_t stream);

void fp8_linear_backward_input(bf16* dinp,           // (N, IC) =
                               Fp8Operand dout,      // (N, OC)
                               Fp8Operand weight_t,  // (IC, OC): the weight transposed
                               int N, int IC, int OC, cudaStream_t stream);

/// dweight += dout^T inp; fp32 or bf16 gradients (optim.grad_dtype) as gemm.hpp's.
void fp8_linear_backward_weight(float* dweight,       // (OC, IC) +=
                                Fp8Operand dout_t,    // (OC, N): dout transposed
                                Fp8Operand inp_t,     // (IC, N): inp transposed
                                int N, int IC, int OC, cudaStream_t stream);
void fp8_linear_backward_weight(bf16* dweight,        // (OC, IC) +=
                                Fp8Operand dout_t, Fp8Operand inp_t, int N, int IC, int OC,
                                cudaStream_t stream);

}  // namespace conveyor
