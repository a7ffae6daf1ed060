#include "kernels/cpu/vector_math.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace conveyor {
namespace {

using cpu::VectorMath;

// Fresh inputs every run, uniform over [lo, hi); the seed is printed to replay a failure.
std::vector<float> fresh_uniform(std::size_t n, float lo, float hi) {
  const auto seed = std::random_device{}();
  MESSAGE("seed " << seed);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// |got - exact| in units of the float spacing at |exact|.
double ulps(float got, double exact) {
  const float a = static_cast<float>(std::abs(exact));
  const double spacing = std::nextafter(a, std::numeric_limits<float>::infinity()) - a;
  return std::abs(static_cast<double>(got) - exact) / spacing;
}

using Fn = void (*)(VectorMath, float*, const float*, std::int64_t);
using Exact = double (*)(double);

// Worst error over the inputs, in ulps; also checks in place gives the same bits.
double worst_ulps(VectorMath variant, Fn fn, Exact exact, const std::vector<float>& x) {
  const auto n = static_cast<std::int64_t>(x.size());
  std::vector<float> y(x.size()), in_place = x;
  fn(variant, y.data(), x.data(), n);
  fn(variant, in_place.data(), in_place.data(), n);
  CHECK(std::memcmp(y.data(), in_place.data(), y.size() * sizeof(float)) == 0);
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, ulps(y[i], exact(x[i])));
  return worst;
}

double exact_tanh(double x) { return std::tanh(x); }
double exact_exp(double x) { return std::exp(x); }

TEST_CASE("vector math: the process uses the widest variant this CPU supports") {
  const auto all = cpu::supported_vector_math();
  REQUIRE(!all.empty());
  CHECK(all.front() == VectorMath::sse);
  CHECK(cpu::vector_math() == all.back());
  MESSAGE("variants: " << std::string(cpu::name(all.back())) << " widest of " << all.size());
}

TEST_CASE("vector tanh and exp are within 4 ulp of the exact values on fresh random inputs, in every variant") {
  // 100003: not a multiple of any vector width, so every variant's padded tail runs.
  const auto tanh_in = fresh_uniform(100003, -10.0f, 10.0f);
  const auto tanh_small = fresh_uniform(1003, -1e-3f, 1e-3f);  // tanh(x) ~ x: relative error
  const auto exp_in = fresh_uniform(100003, -87.0f, 88.0f);    // normal floats out
  for (auto variant : cpu::supported_vector_math()) {
    CAPTURE(std::string(cpu::name(variant)));
    const double t = worst_ulps(variant, cpu::vector_tanh, exact_tanh, tanh_in);
    const double ts = worst_ulps(variant, cpu::vector_tanh, exact_tanh, tanh_small);
    const double e = worst_ulps(variant, cpu::vector_exp, exact_exp, exp_in);
    MESSAGE(std::string(cpu::name(variant)) << ": tanh " << t << " ulp (" << ts
                                            << " near 0), exp " << e << " ulp");
    CHECK(t <= 4.0);
    CHECK(ts <= 4.0);
    CHECK(e <= 4.0);
  }
}

TEST_CASE("vector math rounds an element the same at any position and array length") {
  const auto x = fresh_uniform(67, -5.0f, 5.0f);
  for (auto variant : cpu::supported_vector_math()) {
    CAPTURE(std::string(cpu::name(variant)));
    std::vector<float> whole(x.size());
    cpu::vector_exp(variant, whole.data(), x.data(), static_cast<std::int64_t>(x.size()));
    for (std::size_t start = 0; start < 20; ++start)
      for (std::size_t len = 0; start + len <= x.size(); len += 7) {
        std::vector<float> part(len + 1, -1.0f);  // one guard element past the end
        cpu::vector_exp(variant, part.data(), x.data() + start, static_cast<std::int64_t>(len));
        CHECK(std::memcmp(part.data(), whole.data() + start, len * sizeof(float)) == 0);
        CHECK(part[len] == -1.0f);  // nothing written past n
      }
  }
}

TEST_CASE("vector math: saturation, underflow and NaN") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {20.0f, -20.0f, -104.0f, 0.0f, nan};
  for (auto variant : cpu::supported_vector_math()) {
    CAPTURE(std::string(cpu::name(variant)));
    std::vector<float> t(x.size()), e(x.size());
    cpu::vector_tanh(variant, t.data(), x.data(), static_cast<std::int64_t>(x.size()));
    cpu::vector_exp(variant, e.data(), x.data(), static_cast<std::int64_t>(x.size()));
    CHECK(t[0] == 1.0f);
    CHECK(t[1] == -1.0f);
    CHECK(t[3] == 0.0f);
    CHECK(std::isnan(t[4]));
    CHECK(e[2] == 0.0f);  // exp(-104) is below the smallest float
    CHECK(e[3] == 1.0f);
    CHECK(std::isnan(e[4]));
  }
}

}  // namespace
}  // namespace conveyor
