#include "kernels/cpu/gemm.hpp"

#include "kernels/cpu/blas_core.hpp"

#include <cblas.h>

#include <limits>
#include <stdexcept>
#include <string>

namespace conveyor::cpu {
namespace {

blasint narrow(std::int64_t v, const char* what) {
  if (v < 0 || v > std::numeric_limits<blasint>::max())
    throw std::invalid_argument(std::string("gemm: ") + what +
                                " out of range: " + std::to_string(v));
  return static_cast<blasint>(v);
}

CBLAS_TRANSPOSE op(bool trans) { return trans ? CblasTrans : CblasNoTrans; }

}  // namespace

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
          const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
          std::int64_t ldc) {
  ensure_blas_core();
  cblas_sgemm(CblasRowMajor, op(trans_a), op(trans_b), narrow(m, "m"), narrow(n, "n"),
              narrow(k, "k"), alpha, a, narrow(lda, "lda"), b, narrow(ldb, "ldb"), beta, c,
              narrow(ldc, "ldc"));
}

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
          const double* a, std::int64_t lda, const double* b, std::int64_t ldb, double beta,
          double* c, std::int64_t ldc) {
  ensure_blas_core();
  cblas_dgemm(CblasRowMajor, op(trans_a), op(trans_b), narrow(m, "m"), narrow(n, "n"),
              narrow(k, "k"), alpha, a, narrow(lda, "lda"), b, narrow(ldb, "ldb"), beta, c,
              narrow(ldc, "ldc"));
}

}  // namespace conveyor::cpu
