#include "kernels/cpu/gqa_attention.hpp"

#include <doctest/doctest.h>

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

// Odd sizes: head size 3, 5 positions.
constexpr std::int64_t B = 2, T = 5, NH = 4, hs = 3, C = NH * hs;

std::int64_t width(std::int64_t nkv) { return C + 2 * nkv * hs; }

template <class Real>
std::vector<Real> attend(const std::vector<Real>& qkv, std::int64_t nkv,
                         std::vector<Real>* att = nullptr) {
  std::vector<Real> out(B * T * C), a(B * NH * T * T);
  cpu::gqa_attention_forward(out.data(), a.data(), qkv.data(), B, T, C, NH, nkv);
  if (att) *att = a;
  return out;
}

TEST_CASE("gqa attention forward matches a direct causal softmax with repeated kv heads") {
  for (const std::int64_t nkv : {2, 1}) {
    const std::int64_t W = width(nkv), group = NH / nkv;
    const auto qkv = random_vector(B * T * W, 1);
    std::vector<double> att;
    const auto out = attend(qkv, nkv, &att);
    std::vector<double> want(out.size());
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < NH; ++h) {
        const std::int64_t k_col = C + (h / group) * hs, v_col = k_col + nkv * hs;
        for (std::int64_t i = 0; i < T; ++i) {
          std::vector<double> w(i + 1);
          double sum = 0;
          for (std::int64_t j = 0; j <= i; ++j) {
            double s = 0;
            for (std::int64_t d = 0; d < hs; ++d)
              s += qkv[(b * T + i) * W + h * hs + d] * qkv[(b * T + j) * W + k_col + d];
            w[j] = std::exp(s / std::sqrt(double(hs)));
            sum += w[j];
          }
          for (std::int64_t d = 0; d < hs; ++d) {
            double o = 0;
            for (std::int64_t j = 0; j <= i; ++j)
              o += w[j] / sum * qkv[(b * T + j) * W + v_col + d];
            want[(b * T + i) * C + h * hs + d] = o;
          }
          for (std::int64_t j = i + 1; j < T; ++j)
            CHECK(att[((b * NH + h) * T + i) * T + j] == 0.0);
        }
      }
    CHECK(max_rel_error(out, want) < 1e-12);
  }
}

TEST_CASE("gqa attention is causal: a later position does not change earlier outputs") {
  const std::int64_t W = width(2);
  auto qkv = random_vector(B * T * W, 2);
  const auto before = attend(qkv, 2);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < W; ++i) qkv[(b * T + T - 1) * W + i] += 1.0;
  const auto after = attend(qkv, 2);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t + 1 < T; ++t)
      for (std::int64_t i = 0; i < C; ++i)
        CHECK(after[(b * T + t) * C + i] == before[(b * T + t) * C + i]);
}

TEST_CASE("gqa attention backward matches finite differences (double, rel tol 1e-6), NKV 2, 1, 4") {
  for (const std::int64_t nkv : {2, 1, 4}) {
    auto qkv = random_vector(B * T * width(nkv), 3);
    const auto w_out = random_vector(B * T * C, 4);
    auto loss = [&] { return dot(attend(qkv, nkv), w_out); };
    std::vector<double> att;
    attend(qkv, nkv, &att);
    std::vector<double> dqkv(qkv.size(), 99.0);  // every element must be written
    cpu::gqa_attention_backward_input(dqkv.data(), w_out.data(), qkv.data(), att.data(), B, T, C,
                                      NH, nkv);
    const double e = max_rel_error(dqkv, numeric_gradient(qkv, loss));
    MESSAGE("NH " << NH << ", NKV " << nkv << ": max rel error dqkv " << e);
    CHECK(e < kRelTol);
  }
}

}  // namespace
}  // namespace conveyor
