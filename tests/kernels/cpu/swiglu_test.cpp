#include "kernels/cpu/swiglu.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tests/kernels/cpu/gradient_check.hpp"

namespace conveyor {
namespace {

using testing::dot;
using testing::kRelTol;
using testing::max_rel_error;
using testing::numeric_gradient;
using testing::random_vector;

constexpr std::int64_t N = 4, F = 5;

double silu(double g) { return g / (1.0 + std::exp(-g)); }

TEST_CASE("swiglu forward is silu of the gate half times the up half of each row") {
  for (const std::int64_t f : {F, std::int64_t{600}}) {  // 600: more than one 512-element block
    const auto gu = random_vector(N * 2 * f, 1, 2.0);
    std::vector<double> y(N * f);
    cpu::swiglu_forward(y.data(), gu.data(), N, f);
    std::vector<double> want(N * f);
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < f; ++i)
        want[n * f + i] = silu(gu[n * 2 * f + i]) * gu[n * 2 * f + f + i];
    CHECK(max_rel_error(y, want) < 1e-14);
  }
  // silu(0) = 0 and silu(g) -> g for large g
  std::vector<double> edge{0.0, 40.0, -40.0, 3.0, 2.0, 2.0}, ye(3);
  cpu::swiglu_forward(ye.data(), edge.data(), 1, 3);
  CHECK(ye[0] == 0.0);
  CHECK(ye[1] == doctest::Approx(80.0).epsilon(1e-15));
  CHECK(std::abs(ye[2]) < 1e-15);
}

TEST_CASE("swiglu backward matches finite differences (double, rel tol 1e-6)") {
  for (const std::int64_t f : {F, std::int64_t{13}}) {
    const std::int64_t n_rows = f == F ? N : 3;
    auto gu = random_vector(n_rows * 2 * f, 2, 2.0);
    const auto w_out = random_vector(n_rows * f, 3);
    auto loss = [&] {
      std::vector<double> y(n_rows * f);
      cpu::swiglu_forward(y.data(), gu.data(), n_rows, f);
      return dot(y, w_out);
    };
    std::vector<double> dgu(gu.size(), 99.0);  // every element must be written
    cpu::swiglu_backward_input(dgu.data(), w_out.data(), gu.data(), n_rows, f);
    const double e = max_rel_error(dgu, numeric_gradient(gu, loss));
    MESSAGE("F " << f << ": max rel error d(gate_up) " << e);
    CHECK(e < kRelTol);
  }
}

// Across the 512-element blocks, against the derivative written another way: the central
// differences of a loss of 1000+ terms would have rounding noise near the 1e-6 tolerance.
TEST_CASE("swiglu backward over several blocks is the per-element derivative") {
  constexpr std::int64_t n_rows = 2, f = 600;
  const auto gu = random_vector(n_rows * 2 * f, 4, 2.0), dy = random_vector(n_rows * f, 5);
  std::vector<double> dgu(gu.size(), 99.0);
  cpu::swiglu_backward_input(dgu.data(), dy.data(), gu.data(), n_rows, f);
  std::vector<double> want(gu.size());
  for (std::int64_t n = 0; n < n_rows; ++n)
    for (std::int64_t i = 0; i < f; ++i) {
      const double g = gu[n * 2 * f + i], u = gu[n * 2 * f + f + i], e = std::exp(-g);
      // d/dg g / (1 + e^-g) = (1 + e^-g + g e^-g) / (1 + e^-g)^2
      want[n * 2 * f + i] = dy[n * f + i] * u * (1 + e + g * e) / ((1 + e) * (1 + e));
      want[n * 2 * f + f + i] = dy[n * f + i] * silu(g);
    }
  CHECK(max_rel_error(dgu, want) < 1e-13);
}

TEST_CASE("swiglu in float matches the double kernel (abs tol 1e-6 (1 + |g|) (1 + |u|))") {
  constexpr std::int64_t n_rows = 3, f = 1000;  // not a multiple of the SIMD width or the block
  const auto gd = random_vector(n_rows * 2 * f, 11, 4.0), dyd = random_vector(n_rows * f, 12);
  std::vector<float> gu(gd.begin(), gd.end()), dy(dyd.begin(), dyd.end()), y(n_rows * f),
      dgu(gu.size());
  cpu::swiglu_forward(y.data(), gu.data(), n_rows, f);
  cpu::swiglu_backward_input(dgu.data(), dy.data(), gu.data(), n_rows, f);
  std::vector<double> gr(gu.begin(), gu.end()), dyr(dy.begin(), dy.end()), yr(n_rows * f),
      dgr(gr.size());
  cpu::swiglu_forward(yr.data(), gr.data(), n_rows, f);
  cpu::swiglu_backward_input(dgr.data(), dyr.data(), gr.data(), n_rows, f);
  double worst_y = 0, worst_dx = 0;
  for (std::int64_t n = 0; n < n_rows; ++n)
    for (std::int64_t i = 0; i < f; ++i) {
      const double g = gr[n * 2 * f + i], u = gr[n * 2 * f + f + i], d = dyr[n * f + i];
      const double scale = (1 + std::abs(g)) * (1 + std::abs(u));
      worst_y = std::max(worst_y, std::abs(y[n * f + i] - yr[n * f + i]) / scale);
      for (const std::int64_t j : {n * 2 * f + i, n * 2 * f + f + i})
        worst_dx = std::max(worst_dx, std::abs(dgu[j] - dgr[j]) / (scale * (1 + std::abs(d))));
    }
  MESSAGE("worst scaled error: forward " << worst_y << ", backward " << worst_dx);
  CHECK(worst_y < 1e-6);
  CHECK(worst_dx < 1e-6);
}

}  // namespace
}  // namespace conveyor
