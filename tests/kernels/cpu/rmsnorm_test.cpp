#include "kernels/cpu/rmsnorm.hpp"

#include <doctest/doctest.h>

#include "tests/kernels/cpu/gradient_check.hpp"

namespace conveyor {
namespace {

using testing::dot;
using testing::kRelTol;
using testing::max_rel_error;
using testing::numeric_gradient;
using testing::random_vector;

constexpr std::int64_t N = 5, C = 7;

TEST_CASE("rmsnorm forward divides each row by its root mean square plus eps, times the weight") {
  const auto x = random_vector(N * C, 1, 3.0), w = random_vector(C, 2);
  for (const double eps : {1e-6, 1e-5, 0.5}) {  // 0.5: a wrong or missing eps shows
    std::vector<double> y(N * C), rstd(N);
    cpu::rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), eps, N, C);
    std::vector<double> want(N * C), want_rstd(N);
    for (std::int64_t n = 0; n < N; ++n) {
      double ss = 0;
      for (std::int64_t i = 0; i < C; ++i) ss += x[n * C + i] * x[n * C + i];
      want_rstd[n] = 1.0 / std::sqrt(ss / C + eps);
      for (std::int64_t i = 0; i < C; ++i) want[n * C + i] = x[n * C + i] * want_rstd[n] * w[i];
    }
    CHECK(max_rel_error(y, want) < 1e-14);
    CHECK(max_rel_error(rstd, want_rstd) < 1e-14);
  }
}

TEST_CASE("rmsnorm with unit weight gives rows of unit mean square and keeps the mean") {
  auto x = random_vector(N * C, 3, 2.0);
  for (double& v : x) v += 1.5;  // a nonzero mean, which rmsnorm must not remove
  std::vector<double> w(C, 1.0), y(N * C), rstd(N);
  cpu::rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), 1e-6, N, C);
  for (std::int64_t n = 0; n < N; ++n) {
    double ms = 0, mean_x = 0, mean_y = 0;
    for (std::int64_t i = 0; i < C; ++i) {
      ms += y[n * C + i] * y[n * C + i];
      mean_x += x[n * C + i];
      mean_y += y[n * C + i];
    }
    CHECK(ms / C == doctest::Approx(1.0).epsilon(1e-5));  // 1e-6 in the denominator
    CHECK(mean_y == doctest::Approx(mean_x * rstd[n]).epsilon(1e-13));
    CHECK(std::abs(mean_y / C) > 0.1);
  }
}

TEST_CASE("rmsnorm backward matches finite differences (double, rel tol 1e-6)") {
  for (const double eps : {1e-5, 1e-6}) {
    auto x = random_vector(N * C, 4, 2.0), w = random_vector(C, 5);
    const auto w_out = random_vector(N * C, 6);
    auto loss = [&] {
      std::vector<double> y(N * C), rstd(N);
      cpu::rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), eps, N, C);
      return dot(y, w_out);
    };
    std::vector<double> y(N * C), rstd(N);
    cpu::rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), eps, N, C);
    // dinp and dweight are accumulated: seed both and subtract the seeds afterwards.
    const auto seed_x = random_vector(N * C, 7), seed_w = random_vector(C, 8);
    std::vector<double> dx = seed_x, dw = seed_w;
    cpu::rmsnorm_backward_input(dx.data(), w_out.data(), x.data(), w.data(), rstd.data(), N, C);
    cpu::rmsnorm_backward_weight(dw.data(), w_out.data(), x.data(), rstd.data(), N, C);
    for (std::size_t i = 0; i < dx.size(); ++i) dx[i] -= seed_x[i];
    for (std::size_t i = 0; i < dw.size(); ++i) dw[i] -= seed_w[i];
    const double ex = max_rel_error(dx, numeric_gradient(x, loss));
    const double ew = max_rel_error(dw, numeric_gradient(w, loss));
    MESSAGE("eps " << eps << ": max rel error dinp " << ex << ", dweight " << ew);
    CHECK(ex < kRelTol);
    CHECK(ew < kRelTol);
  }
}

}  // namespace
}  // namespace conveyor
