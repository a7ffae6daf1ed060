#pragma once
// One cuBLASLt matmul, column-major: D (m, n) = alpha op(A) op(B) [+ C], C == D, fp32
// compute. The linear layers in bf16 (gemm.cu) and in FP8 (fp8_gemm.cpp) both go through
// it, so both pin their algorithm the same way (gemm.hpp: cuBLASLt's heuristic top-1 under
// fixed preferences, chosen once per device, shape, layout, types, epilogue and pointer
// alignment, kept for the process): the same inputs give the same bits.
#include <cublasLt.h>

#include "kernels/cuda/types.hpp"

namespace conveyor {

struct LtMatmul {
  int m = 0, n = 0, k = 0;
  bool transa = false, transb = false;
  const void* A = nullptr;
  cudaDataType_t a_type = CUDA_R_16BF;  // CUDA_R_8F_E4M3 / CUDA_R_8F_E5M2 for FP8
  int lda = 0;
  const void* B = nullptr;
  cudaDataType_t b_type = CUDA_R_16BF;
  int ldb = 0;
  void* D = nullptr;
  int ldd = 0;
  cudaDataType_t d_type = CUDA_R_16BF;  // CUDA_R_16BF or CUDA_R_32F
  bool accumulate = false;              // beta = 1
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const bf16* bias = nullptr;           // for *_BIAS epilogues
  const bf16* aux = nullptr;            // GELU input: written by GELU_AUX*, read by DGELU
  // FP8: device floats multiplying A's and B's elements (their dequantization scales).
  const float* a_scale = nullptr;
  const float* b_scale = nullptr;
  bool fast_accum = false;              // FP8: Hopper's faster, less exact accumulation
  const char* what = "";
};

/// Queues the matmul on `stream` (the current device's). Throws CudaError when cuBLASLt
/// has no algorithm for it or a call fails.
void lt_matmul(const LtMatmul& call, cudaStream_t stream);

}  // namespace conveyor
