#include "kernels/cpu/attention.hpp"

#include <doctest/doctest.h>

#include "tests/kernels/cpu/gradient_check.hpp"

namespace conveyor {
namespace {

using testing::dot;
using testing::kRelTol;
using testing::max_rel_error;
using testing::numeric_gradient;
using testing::random_vector;

constexpr std::int64_t B = 2, T = 5, C = 6, NH = 2;

std::vector<double> attend(const std::vector<double>& qkv, std::vector<double>* att = nullptr) {
  std::vector<double> out(B * T * C), a(B * NH * T * T);
  cpu::attention_forward(out.data(), a.data(), qkv.data(), B, T, C, NH);
  if (att) *att = a;
  return out;
}

TEST_CASE("attention forward matches a direct causal softmax") {
  const auto qkv = random_vector(B * T * 3 * C, 1);
  std::vector<double> att;
  const auto out = attend(qkv, &att);
  const std::int64_t hs = C / NH;
  std::vector<double> want(out.size());
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < NH; ++h)
      for (std::int64_t i = 0; i < T; ++i) {
        std::vector<double> w(i + 1);
        double sum = 0;
        for (std::int64_t j = 0; j <= i; ++j) {
          double s = 0;
          for (std::int64_t d = 0; d < hs; ++d)
            s += qkv[(b * T + i) * 3 * C + h * hs + d] * qkv[(b * T + j) * 3 * C + C + h * hs + d];
          w[j] = std::exp(s / std::sqrt(double(hs)));
          sum += w[j];
        }
        for (std::int64_t d = 0; d < hs; ++d) {
          double o = 0;
          for (std::int64_t j = 0; j <= i; ++j)
            o += w[j] / sum * qkv[(b * T + j) * 3 * C + 2 * C + h * hs + d];
          want[(b * T + i) * C + h * hs + d] = o;
        }
        for (std::int64_t j = i + 1; j < T; ++j) CHECK(att[((b * NH + h) * T + i) * T + j] == 0.0);
      }
  CHECK(max_rel_error(out, want) < 1e-12);
}

TEST_CASE("attention is causal: a later position does not change earlier outputs") {
  auto qkv = random_vector(B * T * 3 * C, 2);
  const auto before = attend(qkv);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < 3 * C; ++i) qkv[(b * T + T - 1) * 3 * C + i] += 1.0;
  const auto after = attend(qkv);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t + 1 < T; ++t)
      for (std::int64_t i = 0; i < C; ++i)
        CHECK(after[(b * T + t) * C + i] == before[(b * T + t) * C + i]);
}

TEST_CASE("attention backward matches finite differences (double, rel tol 1e-6)") {
  auto qkv = random_vector(B * T * 3 * C, 3);
  const auto w_out = random_vector(B * T * C, 4);
  auto loss = [&] { return dot(attend(qkv), w_out); };
  std::vector<double> att;
  attend(qkv, &att);
  std::vector<double> dqkv(qkv.size(), 99.0);  // every element must be written
  cpu::attention_backward_input(dqkv.data(), w_out.data(), qkv.data(), att.data(), B, T, C, NH);
  CHECK(max_rel_error(dqkv, numeric_gradient(qkv, loss)) < kRelTol);
}

}  // namespace
}  // namespace conveyor
