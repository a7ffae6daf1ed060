#pragma once
// Finite-difference helpers for the layer tests. The layers are templates, so the tests
// run them in double, where central differences with eps = 1e-5 leave truncation and
// rounding errors far below the tolerance the tests demand: 1e-6 relative (kRelTol).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace conveyor::testing {

inline constexpr double kFdEps = 1e-5;
inline constexpr double kRelTol = 1e-6;

/// Normal(0, stddev) values, deterministic in `seed`.
inline std::vector<double> random_vector(std::size_t n, std::uint64_t seed, double stddev = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> dist(0.0, stddev);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

/// d loss / d x by central differences, one coordinate at a time; `loss` reads x.
template <class Loss>
std::vector<double> numeric_gradient(std::vector<double>& x, Loss&& loss, double eps = kFdEps) {
  std::vector<double> g(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + eps;
    const double up = loss();
    x[i] = saved - eps;
    const double down = loss();
    x[i] = saved;
    g[i] = (up - down) / (2 * eps);
  }
  return g;
}

/// max_i |a_i - b_i| / max(|a_i|, |b_i|, floor): relative error, absolute near zero.
inline double max_rel_error(const std::vector<double>& a, const std::vector<double>& b,
                            double floor = 1e-3) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double scale = std::max({std::abs(a[i]), std::abs(b[i]), floor});
    worst = std::max(worst, std::abs(a[i] - b[i]) / scale);
  }
  return worst;
}

/// sum_i out_i * w_i: a scalar loss whose gradient with respect to out is w.
inline double dot(const std::vector<double>& out, const std::vector<double>& w) {
  double s = 0;
  for (std::size_t i = 0; i < out.size(); ++i) s += out[i] * w[i];
  return s;
}

}  // namespace conveyor::testing
