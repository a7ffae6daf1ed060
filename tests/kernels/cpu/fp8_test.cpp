// The FP8 reference (kernels/cpu/fp8.hpp, fp8_scaling.hpp) against the OCP formats' own
// definitions: every code decoded and encoded back, the values the formats name (largest
// finite, smallest subnormal, the NaN and infinity patterns), rounding to nearest with ties
// to even at every pair of neighbours, saturation, and the scales of both recipes.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <random>
#include <vector>

#include "kernels/cpu/fp8.hpp"
#include "kernels/cpu/fp8_scaling.hpp"

using namespace conveyor::cpu;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

bool is_nan_code(std::uint8_t c, const Fp8Format& f) { return std::isnan(fp8_to_float(c, f)); }

// The finite non-negative values of a format, ascending, with their codes.
std::vector<std::pair<float, std::uint8_t>> finite_ladder(const Fp8Format& f) {
  std::vector<std::pair<float, std::uint8_t>> out;
  for (int c = 0; c < 0x80; ++c) {
    const float v = fp8_to_float(static_cast<std::uint8_t>(c), f);
    if (std::isfinite(v)) out.emplace_back(v, static_cast<std::uint8_t>(c));
  }
  return out;
}

}  // namespace

TEST_CASE("fp8 formats name their values: largest finite, smallest subnormal, NaN, infinity") {
  CHECK(fp8_to_float(0x7e, kE4M3) == 448.0f);
  CHECK(fp8_to_float(0xfe, kE4M3) == -448.0f);
  CHECK(is_nan_code(0x7f, kE4M3));
  CHECK(is_nan_code(0xff, kE4M3));
  CHECK(fp8_to_float(0x01, kE4M3) == std::ldexp(1.0f, -9));
  CHECK(fp8_to_float(0x08, kE4M3) == std::ldexp(1.0f, -6));  // smallest normal
  CHECK(fp8_to_float(0x38, kE4M3) == 1.0f);
  CHECK(fp8_to_float(0x7b, kE5M2) == 57344.0f);
  CHECK(fp8_to_float(0x7c, kE5M2) == kInf);
  CHECK(fp8_to_float(0xfc, kE5M2) == -kInf);
  CHECK(is_nan_code(0x7d, kE5M2));
  CHECK(fp8_to_float(0x01, kE5M2) == std::ldexp(1.0f, -16));
  CHECK(fp8_to_float(0x3c, kE5M2) == 1.0f);
  // E4M3 has one NaN per sign and no infinity: 254 other codes, all finite.
  int e4m3_nans = 0, e5m2_specials = 0;
  for (int c = 0; c < 256; ++c) {
    e4m3_nans += is_nan_code(static_cast<std::uint8_t>(c), kE4M3);
    e5m2_specials += !std::isfinite(fp8_to_float(static_cast<std::uint8_t>(c), kE5M2));
  }
  CHECK(e4m3_nans == 2);
  CHECK(e5m2_specials == 8);  // ±inf and 3 NaNs of each sign
}

TEST_CASE("fp8 every code decodes and encodes back to itself, and values ascend with the code") {
  for (const Fp8Format& f : {kE4M3, kE5M2}) {
    const std::string format = f.name;
    CAPTURE(format);
    for (int c = 0; c < 256; ++c) {
      const auto code = static_cast<std::uint8_t>(c);
      const float v = fp8_to_float(code, f);
      CAPTURE(c);
      if (std::isnan(v)) {
        CHECK(is_nan_code(float_to_fp8(v, f), f));
      } else if (std::isinf(v)) {
        // Saturating conversion: infinity becomes the largest finite value.
        CHECK(fp8_to_float(float_to_fp8(v, f), f) == (v > 0 ? 1.0f : -1.0f) * float(f.max_finite));
      } else {
        CHECK(float_to_fp8(v, f) == code);
      }
    }
    const auto ladder = finite_ladder(f);
    for (std::size_t i = 1; i < ladder.size(); ++i) CHECK(ladder[i - 1].first < ladder[i].first);
    CHECK(ladder.back().first == float(f.max_finite));
  }
}

TEST_CASE("fp8 rounds to the nearest value, ties to the even code, between every pair of neighbours") {
  for (const Fp8Format& f : {kE4M3, kE5M2}) {
    const std::string format = f.name;
    CAPTURE(format);
    const auto ladder = finite_ladder(f);
    for (std::size_t i = 1; i < ladder.size(); ++i) {
      const auto [lo, lo_code] = ladder[i - 1];
      const auto [hi, hi_code] = ladder[i];
      const float mid = 0.5f * (lo + hi);  // exact: neighbours differ by a power of two
      CAPTURE(lo);
      CAPTURE(hi);
      CHECK(float_to_fp8(std::nextafter(mid, 0.0f), f) == lo_code);
      CHECK(float_to_fp8(std::nextafter(mid, kInf), f) == hi_code);
      // The tie goes to the code whose mantissa is even.
      CHECK(float_to_fp8(mid, f) == ((lo_code & 1) == 0 ? lo_code : hi_code));
      // The same below zero, mirrored.
      CHECK(float_to_fp8(-std::nextafter(mid, 0.0f), f) == (lo_code | 0x80));
    }
  }
}

TEST_CASE("fp8 saturates beyond the largest finite value and keeps NaN, at both scales of use") {
  CHECK(float_to_fp8(1e6f, kE4M3) == 0x7e);
  CHECK(float_to_fp8(-1e6f, kE4M3) == 0xfe);
  CHECK(float_to_fp8(kInf, kE4M3) == 0x7e);
  CHECK(float_to_fp8(464.0f, kE4M3) == 0x7e);  // would round past 448: saturates instead
  CHECK(float_to_fp8(1e9f, kE5M2) == 0x7b);
  CHECK(float_to_fp8(-kInf, kE5M2) == 0xfb);
  CHECK(is_nan_code(float_to_fp8(std::nanf(""), kE4M3), kE4M3));
  CHECK(is_nan_code(float_to_fp8(std::nanf(""), kE5M2), kE5M2));
  // Below half the smallest subnormal: zero of the same sign; half of it ties to zero (even).
  CHECK(float_to_fp8(std::ldexp(1.0f, -11), kE4M3) == 0x00);
  CHECK(float_to_fp8(std::ldexp(1.0f, -10), kE4M3) == 0x00);
  CHECK(float_to_fp8(std::ldexp(1.5f, -10), kE4M3) == 0x01);
  CHECK(float_to_fp8(-std::ldexp(1.0f, -11), kE4M3) == 0x80);
}

TEST_CASE("fp8 quantized with a scale comes back within half a step of the format, relatively") {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> x(4096);
  for (float& v : x) v = normal(rng);
  for (const Fp8Format& f : {kE4M3, kE5M2}) {
    const std::string format = f.name;
    CAPTURE(format);
    const float amax = fp8_amax(x.data(), static_cast<std::int64_t>(x.size()));
    const float scale = fp8_scale_for(amax, f);
    // The largest element lands on the largest finite value.
    CHECK(fp8_to_float(quantize_fp8(amax, scale, f), f) == doctest::Approx(f.max_finite).epsilon(1e-6));
    // A normal value's relative error is at most half a unit in the last place: 2^-(M+1).
    const double ulp_half = std::ldexp(1.0, -(f.mantissa_bits + 1));
    for (float v : x) {
      const float back = dequantize_fp8(quantize_fp8(v, scale, f), scale, f);
      if (std::fabs(v * scale) >= std::ldexp(1.0, 1 - f.bias))  // normal range
        CHECK(std::fabs(back - v) <= ulp_half * std::fabs(v) * (1 + 1e-6));
    }
  }
}

TEST_CASE("fp8 amax sees a NaN, a scale stays finite for an all-zero tensor, history takes the max") {
  const float x[] = {0.5f, -3.0f, 2.0f};
  CHECK(fp8_amax(x, 3) == 3.0f);
  const float with_nan[] = {1.0f, std::nanf(""), 5.0f};
  CHECK(std::isnan(fp8_amax(with_nan, 3)));
  CHECK_FALSE(fp8_amax_ok(fp8_amax(with_nan, 3)));
  const float zeros[] = {0.0f, -0.0f};
  CHECK(std::isfinite(fp8_scale_for(fp8_amax(zeros, 2), kE4M3)));
  CHECK(fp8_scale_for(2.0f, kE4M3) == 224.0f);

  AmaxHistory h(3);
  CHECK(h.scale(kE4M3) == 1.0f);  // nothing recorded yet
  for (float a : {1.0f, 4.0f, 2.0f}) CHECK(h.record(a));
  CHECK(h.scale(kE4M3) == 112.0f);  // 448 / 4
  CHECK_FALSE(h.record(kInf));       // an overflow is refused, the history unchanged
  CHECK(h.size() == 3);
  CHECK(h.record(0.5f));  // 1 leaves the window of 3: 4 is still in it
  CHECK(h.scale(kE4M3) == 112.0f);
  CHECK(h.record(0.25f));  // 4 leaves: 2 is the largest now
  CHECK(h.scale(kE4M3) == 224.0f);
  CHECK(h.scale(kE5M2) == 28672.0f);
}
