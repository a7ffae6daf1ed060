#include "kernels/cpu/linear.hpp"

#include <doctest/doctest.h>

#include <cstring>

#include "tests/kernels/cpu/gradient_check.hpp"

namespace conveyor {
namespace {

using testing::dot;
using testing::kRelTol;
using testing::max_rel_error;
using testing::numeric_gradient;
using testing::random_vector;

constexpr std::int64_t N = 6, IC = 5, OC = 7;

TEST_CASE("linear forward computes x W^T + b with W stored (out, in)") {
  auto x = random_vector(N * IC, 1), W = random_vector(OC * IC, 2), b = random_vector(OC, 3);
  std::vector<double> y(N * OC);
  cpu::linear_forward(y.data(), x.data(), W.data(), b.data(), N, IC, OC);
  std::vector<double> want(N * OC);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t o = 0; o < OC; ++o) {
      double s = b[o];
      for (std::int64_t i = 0; i < IC; ++i) s += x[n * IC + i] * W[o * IC + i];
      want[n * OC + o] = s;
    }
  CHECK(max_rel_error(y, want) < 1e-12);
}

TEST_CASE("linear backward matches finite differences (double, rel tol 1e-6)") {
  auto x = random_vector(N * IC, 4), W = random_vector(OC * IC, 5), b = random_vector(OC, 6);
  const auto w_out = random_vector(N * OC, 7);  // dloss/dout
  for (bool with_bias : {true, false}) {
    CAPTURE(with_bias);
    auto loss = [&] {
      std::vector<double> y(N * OC);
      cpu::linear_forward(y.data(), x.data(), W.data(), with_bias ? b.data() : nullptr, N, IC, OC);
      return dot(y, w_out);
    };
    std::vector<double> dx(N * IC, 123.0), dW(OC * IC, 0.0), db(OC, 0.0);
    cpu::linear_backward_input(dx.data(), w_out.data(), W.data(), N, IC, OC);
    cpu::linear_backward_weight(dW.data(), with_bias ? db.data() : nullptr, w_out.data(), x.data(),
                                N, IC, OC);
    CHECK(max_rel_error(dx, numeric_gradient(x, loss)) < kRelTol);
    CHECK(max_rel_error(dW, numeric_gradient(W, loss)) < kRelTol);
    if (with_bias) CHECK(max_rel_error(db, numeric_gradient(b, loss)) < kRelTol);
  }
}

TEST_CASE("linear weight gradients accumulate with += across calls") {
  std::vector<float> x(N * IC), dy(N * OC);
  auto xs = random_vector(x.size(), 8), dys = random_vector(dy.size(), 9);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(xs[i]);
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<float>(dys[i]);
  std::vector<float> dW(OC * IC, 0.0f), db(OC, 0.0f);
  cpu::linear_backward_weight(dW.data(), db.data(), dy.data(), x.data(), N, IC, OC);
  const auto dW1 = dW, db1 = db;
  cpu::linear_backward_weight(dW.data(), db.data(), dy.data(), x.data(), N, IC, OC);
  for (std::size_t i = 0; i < dW.size(); ++i) CHECK(dW[i] == 2.0f * dW1[i]);
  for (std::size_t i = 0; i < db.size(); ++i) CHECK(db[i] == 2.0f * db1[i]);
}

}  // namespace
}  // namespace conveyor
