#include "kernels/cpu/gelu.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "tests/kernels/cpu/gradient_check.hpp"

namespace conveyor {
namespace {

using testing::dot;
using testing::kRelTol;
using testing::max_rel_error;
using testing::numeric_gradient;
using testing::random_vector;

TEST_CASE("gelu forward is the tanh approximation") {
  std::vector<double> x{-3.0, -0.5, 0.0, 0.5, 3.0}, y(5);
  cpu::gelu_forward(y.data(), x.data(), 5);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double u = std::sqrt(2.0 / std::numbers::pi) * (x[i] + 0.044715 * x[i] * x[i] * x[i]);
    CHECK(y[i] == doctest::Approx(0.5 * x[i] * (1.0 + std::tanh(u))).epsilon(1e-14));
  }
  CHECK(y[2] == 0.0);
}

TEST_CASE("gelu backward matches finite differences (double, rel tol 1e-6)") {
  constexpr std::int64_t N = 40;
  auto x = random_vector(N, 1, 2.0);
  const auto w_out = random_vector(N, 2);
  auto loss = [&] {
    std::vector<double> y(N);
    cpu::gelu_forward(y.data(), x.data(), N);
    return dot(y, w_out);
  };
  std::vector<double> dx = w_out;  // in place: dinp == dout
  cpu::gelu_backward_input(dx.data(), dx.data(), x.data(), N);
  CHECK(max_rel_error(dx, numeric_gradient(x, loss)) < kRelTol);
}

TEST_CASE("gelu in float matches the double formula on fresh random inputs (abs tol 1e-6 (1 + |x|))") {
  constexpr std::int64_t N = 5000;  // not a multiple of the SIMD width or the backward's block
  const auto xd = random_vector(N, 11, 4.0);
  const auto gd = random_vector(N, 12, 1.0);
  std::vector<float> x(xd.begin(), xd.end()), g(gd.begin(), gd.end()), y(N), dx(N);
  cpu::gelu_forward(y.data(), x.data(), N);
  cpu::gelu_backward_input(dx.data(), g.data(), x.data(), N);
  std::vector<double> xr(x.begin(), x.end()), yr(N), dxr(gd.size());
  std::vector<double> gr(g.begin(), g.end());
  cpu::gelu_forward(yr.data(), xr.data(), N);
  cpu::gelu_backward_input(dxr.data(), gr.data(), xr.data(), N);
  double worst_y = 0, worst_dx = 0;
  for (std::int64_t i = 0; i < N; ++i) {
    const double scale = 1.0 + std::abs(xr[i]);
    worst_y = std::max(worst_y, std::abs(y[i] - yr[i]) / scale);
    worst_dx = std::max(worst_dx, std::abs(dx[i] - dxr[i]) / (scale * (1.0 + std::abs(gr[i]))));
  }
  MESSAGE("worst scaled error: forward " << worst_y << ", backward " << worst_dx);
  CHECK(worst_y < 1e-6);
  CHECK(worst_dx < 1e-6);
}

}  // namespace
}  // namespace conveyor
