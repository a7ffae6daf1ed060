#include "kernels/cpu/rotary.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "tests/kernels/cpu/gradient_check.hpp"

namespace conveyor {
namespace {

using testing::dot;
using testing::kRelTol;
using testing::max_rel_error;
using testing::numeric_gradient;
using testing::random_vector;

// A (B, T, H, D) slice inside wider rows, as the k part of a fused qkv row would be.
constexpr std::int64_t B = 2, T = 5, H = 3, D = 6, kOffset = 4, kStride = kOffset + H * D + 5;

struct Tables {
  std::vector<double> cos, sin;
};

Tables tables(std::int64_t t, std::int64_t d, double theta,
              const cpu::RotaryLlama3Scaling* scaling = nullptr) {
  auto w = cpu::rotary_inv_freq(d, theta);
  if (scaling) cpu::rotary_llama3_scaling(w, *scaling);
  Tables tb{std::vector<double>(t * d / 2), std::vector<double>(t * d / 2)};
  cpu::rotary_tables(tb.cos.data(), tb.sin.data(), w.data(), t, d);
  return tb;
}

TEST_CASE("rotary tables: position 0 is the identity and inv_freq is theta^(-2i/D)") {
  constexpr std::int64_t d = 8;
  const auto w = cpu::rotary_inv_freq(d, 10000.0);
  REQUIRE(w.size() == 4);
  CHECK(w[0] == 1.0);
  CHECK(w[1] == doctest::Approx(0.1).epsilon(1e-15));   // 10000^(-2/8) = 10^-1
  CHECK(w[2] == doctest::Approx(0.01).epsilon(1e-15));  // 10000^(-4/8)
  const auto tb = tables(6, d, 10000.0);
  for (std::int64_t i = 0; i < d / 2; ++i) {
    CHECK(tb.cos[i] == 1.0);
    CHECK(tb.sin[i] == 0.0);
  }
  // position 3, pair 1: angle 3 * 0.1; position 5, pair 0: angle 5
  CHECK(tb.cos[3 * 4 + 1] == doctest::Approx(0.955336489125606).epsilon(1e-14));
  CHECK(tb.sin[3 * 4 + 1] == doctest::Approx(0.29552020666134).epsilon(1e-13));
  CHECK(tb.cos[5 * 4 + 0] == doctest::Approx(0.283662185463226).epsilon(1e-13));
  CHECK(tb.sin[5 * 4 + 0] == doctest::Approx(-0.958924274663138).epsilon(1e-14));
  // float tables are the double values rounded once
  std::vector<float> cf(6 * 4), sf(6 * 4);
  cpu::rotary_tables(cf.data(), sf.data(), w.data(), 6, d);
  for (std::size_t i = 0; i < cf.size(); ++i) {
    CHECK(cf[i] == static_cast<float>(tb.cos[i]));
    CHECK(sf[i] == static_cast<float>(tb.sin[i]));
  }
}

TEST_CASE("llama3 scaling keeps short wavelengths, divides long ones by factor, blends between") {
  // theta 10000, D 16: w_i = 10^(-i/2), wavelengths 2 pi 10^(i/2) = 6.3, 19.9, 62.8, 199, 628,
  // 1987, 6283, 19869. With L = 1024, low 1, high 4: l_high = 256, l_low = 1024, so pairs 0-3
  // stay, pair 4 (628) is blended, pairs 5-7 are divided by the factor.
  constexpr std::int64_t d = 16;
  const cpu::RotaryLlama3Scaling p{8.0, 1.0, 4.0, 1024.0};
  const auto w = cpu::rotary_inv_freq(d, 10000.0);
  auto ws = w;
  cpu::rotary_llama3_scaling(ws, p);
  const double l_high = p.original_max_position_embeddings / p.high_freq_factor;
  const double l_low = p.original_max_position_embeddings / p.low_freq_factor;
  int unchanged = 0, divided = 0, blended = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    const double wavelen = 2 * std::numbers::pi / w[i];
    if (wavelen < l_high) {
      CHECK(ws[i] == w[i]);
      ++unchanged;
    } else if (wavelen > l_low) {
      CHECK(ws[i] == w[i] / p.factor);
      ++divided;
    } else {
      CHECK(ws[i] < w[i]);
      CHECK(ws[i] > w[i] / p.factor);
      ++blended;
    }
  }
  CHECK(unchanged == 4);
  CHECK(blended == 1);
  CHECK(divided == 3);
  // pair 4 by hand: w = 0.01, L / wavelen = 1024 * 0.01 / (2 pi) = 1.62974661...,
  // s = (1.62974661 - 1) / 3 = 0.20991554, w' = 0.01 ((1 - s) / 8 + s) = 0.003086760967
  CHECK(ws[4] == doctest::Approx(0.003086760967).epsilon(1e-9));
}

TEST_CASE("llama3 scaling with Llama 3.1's numbers keeps the frequencies decreasing") {
  const cpu::RotaryLlama3Scaling p{};  // factor 8, low 1, high 4, original context 8192
  const auto w = cpu::rotary_inv_freq(128, 500000.0);
  auto ws = w;
  cpu::rotary_llama3_scaling(ws, p);
  CHECK(ws.front() == w.front());
  CHECK(ws.back() == w.back() / 8.0);
  for (std::size_t i = 1; i < ws.size(); ++i) CHECK(ws[i] < ws[i - 1]);
}

TEST_CASE("rotary forward rotates pairs (i, i + D/2) and leaves the rest of the row alone") {
  const auto tb = tables(T, D, 10000.0);
  const auto x = random_vector(B * T * kStride, 1);
  auto y = x;
  cpu::rotary_forward(y.data() + kOffset, tb.cos.data(), tb.sin.data(), B, T, H, D, kStride);
  std::vector<double> want = x;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t d = 0; d < D; ++d) {
          const std::int64_t row = (b * T + t) * kStride + kOffset + h * D;
          const std::int64_t i = d % (D / 2);
          // q cos + rotate_half(q) sin, rotate_half(q) = [-q2, q1], angle t theta^(-2i/D)
          const double angle = t * std::pow(10000.0, -2.0 * i / D);
          const double rh = d < D / 2 ? -x[row + d + D / 2] : x[row + d - D / 2];
          want[row + d] = x[row + d] * std::cos(angle) + rh * std::sin(angle);
        }
  CHECK(max_rel_error(y, want) < 1e-14);
  for (std::int64_t r = 0; r < B * T; ++r) {
    for (std::int64_t c = 0; c < kOffset; ++c) CHECK(y[r * kStride + c] == x[r * kStride + c]);
    for (std::int64_t c = kOffset + H * D; c < kStride; ++c)
      CHECK(y[r * kStride + c] == x[r * kStride + c]);
  }
  // the inverse rotation (backward) takes it back
  cpu::rotary_backward(y.data() + kOffset, tb.cos.data(), tb.sin.data(), B, T, H, D, kStride);
  CHECK(max_rel_error(y, x) < 1e-14);
}

TEST_CASE("rotary backward matches finite differences (double, rel tol 1e-6), plain and llama3") {
  // D = 6, theta 10000: wavelengths 6.3, 135, 2916; with L = 200, low 1, high 4 (l_high = 50,
  // l_low = 200) the three pairs fall in the three regimes: kept, blended, divided.
  const cpu::RotaryLlama3Scaling p{4.0, 1.0, 4.0, 200.0};
  const cpu::RotaryLlama3Scaling* none = nullptr;
  for (const cpu::RotaryLlama3Scaling* scaling : {none, &p}) {
    const auto tb = tables(T, D, 10000.0, scaling);
    auto x = random_vector(B * T * kStride, 2);
    const auto w_out = random_vector(B * T * kStride, 3);
    auto loss = [&] {
      auto y = x;
      cpu::rotary_forward(y.data() + kOffset, tb.cos.data(), tb.sin.data(), B, T, H, D, kStride);
      return dot(y, w_out);
    };
    auto dx = w_out;  // in place: dout in, dinp out; columns outside the slice pass through
    cpu::rotary_backward(dx.data() + kOffset, tb.cos.data(), tb.sin.data(), B, T, H, D, kStride);
    const double e = max_rel_error(dx, numeric_gradient(x, loss));
    MESSAGE(std::string(scaling ? "llama3" : "plain") << ": max rel error dinp " << e);
    CHECK(e < kRelTol);
  }
}

}  // namespace
}  // namespace conveyor
