// FP8 linear layers (fp8_gemm.hpp): the three GEMMs in cuBLASLt's TN form, column-major
// terms as gemm.cu's (row-major (R, C) data is column-major (C, R)):
//   forward          D (OC, N)  = op_T(weight as (IC, OC)) · inp (IC, N)
//   backward input   D (IC, N)  = op_T(weight_t as (OC, IC)) · dout (OC, N)
//   backward weight  D (IC, OC) += op_T(inp_t as (N, IC)) · dout_t (N, OC)
#include "kernels/cuda/fp8_gemm.hpp"

#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/lt_matmul.hpp"

namespace conveyor {
namespace {

cudaDataType_t type_of(Fp8Kind k) { return k == Fp8Kind::e4m3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; }

void check(const char* what, const Fp8Operand& a, const Fp8Operand& b, int N, int IC, int OC) {
  const auto fail = [&](const std::string& why) { throw std::invalid_argument(std::string(what) + ": " + why); };
  if (N <= 0 || IC <= 0 || OC <= 0 || N % 16 != 0 || IC % 16 != 0 || OC % 16 != 0)
    fail("N, IC, OC must be positive multiples of 16 (16-byte FP8 rows), got " + std::to_string(N) + ", " +
         std::to_string(IC) + ", " + std::to_string(OC));
  if (!a.data || !b.data || !a.dequant || !b.dequant) fail("an operand or its dequantization scale is null");
  if (a.kind == Fp8Kind::e5m2 && b.kind == Fp8Kind::e5m2)
    fail("two E5M2 operands: the FP8 tensor cores take E4M3 x E4M3 or one E5M2 with one E4M3");
}

template <class G>
void backward_weight(G* dweight, Fp8Operand dout_t, Fp8Operand inp_t, int N, int IC, int OC,
                     cudaStream_t stream) {
  check("fp8_linear_backward_weight", dout_t, inp_t, N, IC, OC);
  constexpr bool kF32 = std::is_same_v<G, float>;
  lt_matmul({.m = IC, .n = OC, .k = N, .transa = true, .transb = false, .A = inp_t.data,
             .a_type = type_of(inp_t.kind), .lda = N, .B = dout_t.data,
             .b_type = type_of(dout_t.kind), .ldb = N, .D = dweight, .ldd = IC,
             .d_type = kF32 ? CUDA_R_32F : CUDA_R_16BF, .accumulate = true,
             .a_scale = inp_t.dequant, .b_scale = dout_t.dequant,
             .what = "fp8_linear_backward_weight"},
            stream);
}

}  // namespace

void fp8_linear_forward(bf16* out, Fp8Operand inp, Fp8Operand weight, const bf16* bias, int N,
                        int IC, int OC, cudaStream_t stream) {
  check("fp8_linear_forward", inp, weight, N, IC, OC);
  lt_matmul({.m = OC, .n = N, .k = IC, .transa = true, .transb = false, .A = weight.data,
             .a_type = type_of(weight.kind), .lda = IC, .B = inp.data, .b_type = type_of(inp.kind),
             .ldb = IC, .D = out, .ldd = OC, .d_type = CUDA_R_16BF, .accumulate = false,
             .epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT, .bias = bias,
             .a_scale = weight.dequant, .b_scale = inp.dequant, .what = "fp8_linear_forward"},
            stream);
}

void fp8_linear_backward_input(bf16* dinp, Fp8Operand dout, Fp8Operand weight_t, int N, int IC,
                               int OC, cudaStream_t stream) {
  check("fp8_linear_backward_input", dout, weight_t, N, IC, OC);
  lt_matmul({.m = IC, .n = N, .k = OC, .transa = true, .transb = false, .A = weight_t.data,
             .a_type = type_of(weight_t.kind), .lda = OC, .B = dout.data,
             .b_type = type_of(dout.kind), .ldb = OC, .D = dinp, .ldd = IC, .d_type = CUDA_R_16BF,
             .accumulate = false, .a_scale = weight_t.dequant, .b_scale = dout.dequant,
             .what = "fp8_linear_backward_input"},
            stream);
}

void fp8_linear_backward_weight(float* dweight, Fp8Operand dout_t, Fp8Operand inp_t, int N, int IC,
                                int OC, cudaStream_t stream) {
  backward_weight(dweight, dout_t, inp_t, N, IC, OC, stream);
}

void fp8_linear_backward_weight(bf16* dweight, Fp8Operand dout_t, Fp8Operand inp_t, int N, int IC,
                                int OC, cudaStream_t stream) {
  backward_weight(dweight, dout_t, inp_t, N, IC, OC, stream);
}

}  // namespace conveyor
