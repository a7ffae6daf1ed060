#include "kernels/cpu/layernorm.hpp"

#include <doctest/doctest.h>

#include "tests/kernels/cpu/gradient_check.hpp"

namespace conveyor {
namespace {

using testing::dot;
using testing::kRelTol;
using testing::max_rel_error;
using testing::numeric_gradient;
using testing::random_vector;

constexpr std::int64_t N = 5, C = 8;

TEST_CASE("layernorm forward normalises each row to zero mean and unit variance") {
  auto x = random_vector(N * C, 1, 3.0);
  std::vector<double> w(C, 1.0), b(C, 0.0), y(N * C), mean(N), rstd(N);
  cpu::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  for (std::int64_t n = 0; n < N; ++n) {
    double m = 0, v = 0;
    for (std::int64_t i = 0; i < C; ++i) m += y[n * C + i];
    for (std::int64_t i = 0; i < C; ++i) v += (y[n * C + i] - m / C) * (y[n * C + i] - m / C);
    CHECK(std::abs(m / C) < 1e-12);
    CHECK(v / C == doctest::Approx(1.0).epsilon(1e-3));  // 1e-5 in the denominator
  }
}

TEST_CASE("layernorm backward matches finite differences (double, rel tol 1e-6)") {
  auto x = random_vector(N * C, 2, 2.0), w = random_vector(C, 3), b = random_vector(C, 4);
  const auto w_out = random_vector(N * C, 5);
  auto loss = [&] {
    std::vector<double> y(N * C), mean(N), rstd(N);
    cpu::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    return dot(y, w_out);
  };
  std::vector<double> y(N * C), mean(N), rstd(N);
  cpu::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  // dinp is accumulated: seed it with a residual gradient and subtract it afterwards.
  const auto seed = random_vector(N * C, 6);
  std::vector<double> dx = seed, dw(C, 0.0), db(C, 0.0);
  cpu::layernorm_backward_input(dx.data(), w_out.data(), x.data(), w.data(), mean.data(),
                                rstd.data(), N, C);
  cpu::layernorm_backward_weight(dw.data(), db.data(), w_out.data(), x.data(), mean.data(),
                                 rstd.data(), N, C);
  for (std::size_t i = 0; i < dx.size(); ++i) dx[i] -= seed[i];
  CHECK(max_rel_error(dx, numeric_gradient(x, loss)) < kRelTol);
  CHECK(max_rel_error(dw, numeric_gradient(w, loss)) < kRelTol);
  CHECK(max_rel_error(db, numeric_gradient(b, loss)) < kRelTol);
}

}  // namespace
}  // namespace conveyor
