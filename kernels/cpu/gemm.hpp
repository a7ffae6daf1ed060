#pragma once
// Row-major GEMM through OpenBLAS: C (m, n) = alpha * op(A) (m, k) * op(B) (k, n) + beta * C.
// With set_cpu_kernel_threads(1) it runs in the calling thread, and its result depends only
// on the shapes, leading dimensions and values: never on the calling thread or on which
// other threads call it at the same time. Both precisions exist so that every layer can be
// instantiated in double for the finite-difference tests; the model runs in float.
#include <cstdint>

namespace conveyor::cpu {

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
          const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
          std::int64_t ldc);

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
          const double* a, std::int64_t lda, const double* b, std::int64_t ldb, double beta,
          double* c, std::int64_t ldc);

}  // namespace conveyor::cpu
