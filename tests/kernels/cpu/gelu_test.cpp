#include "kernels/cpu/gelu.hpp"

#include <doctest/doctest.h>

#include <numbers>

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

}  // namespace
}  // namespace conveyor
