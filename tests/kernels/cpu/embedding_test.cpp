#include "kernels/cpu/embedding.hpp"

#include <doctest/doctest.h>

#include "tests/kernels/cpu/gradient_check.hpp"

namespace conveyor {
namespace {

using testing::dot;
using testing::kRelTol;
using testing::max_rel_error;
using testing::numeric_gradient;
using testing::random_vector;

constexpr std::int64_t B = 2, T = 3, C = 4, V = 5, maxT = 4;
// Token 3 appears three times: its gradient rows must add up.
const std::vector<std::int32_t> kTokens{3, 0, 3, 4, 3, 1};

TEST_CASE("embedding forward adds the token row and the position row") {
  auto wte = random_vector(V * C, 1), wpe = random_vector(maxT * C, 2);
  std::vector<double> out(B * T * C);
  cpu::embedding_forward(out.data(), kTokens.data(), wte.data(), wpe.data(), B, T, C);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t i = 0; i < C; ++i)
        CHECK(out[(b * T + t) * C + i] == wte[kTokens[b * T + t] * C + i] + wpe[t * C + i]);
}

TEST_CASE("embedding backward matches finite differences (double, rel tol 1e-6)") {
  auto wte = random_vector(V * C, 3), wpe = random_vector(maxT * C, 4);
  const auto w_out = random_vector(B * T * C, 5);
  auto loss = [&] {
    std::vector<double> out(B * T * C);
    cpu::embedding_forward(out.data(), kTokens.data(), wte.data(), wpe.data(), B, T, C);
    return dot(out, w_out);
  };
  std::vector<double> dwte(V * C, 0.0), dwpe(maxT * C, 0.0);
  cpu::embedding_backward_weight(dwte.data(), dwpe.data(), w_out.data(), kTokens.data(), B, T, C);
  CHECK(max_rel_error(dwte, numeric_gradient(wte, loss)) < kRelTol);
  CHECK(max_rel_error(dwpe, numeric_gradient(wpe, loss)) < kRelTol);
  // Position T (unused) and token 2 (absent) get no gradient.
  for (std::int64_t i = 0; i < C; ++i) {
    CHECK(dwpe[T * C + i] == 0.0);
    CHECK(dwte[2 * C + i] == 0.0);
  }
}

TEST_CASE("the token embedding alone copies the token's row, its backward adds the rows up") {
  auto wte = random_vector(V * C, 6);
  std::vector<double> out(B * T * C);
  cpu::token_embedding_forward(out.data(), kTokens.data(), wte.data(), B, T, C);
  for (std::int64_t bt = 0; bt < B * T; ++bt)
    for (std::int64_t i = 0; i < C; ++i) CHECK(out[bt * C + i] == wte[kTokens[bt] * C + i]);
  const auto w_out = random_vector(B * T * C, 7);
  auto loss = [&] {
    cpu::token_embedding_forward(out.data(), kTokens.data(), wte.data(), B, T, C);
    return dot(out, w_out);
  };
  std::vector<double> dwte(V * C, 0.0);
  cpu::token_embedding_backward_weight(dwte.data(), w_out.data(), kTokens.data(), B, T, C);
  CHECK(max_rel_error(dwte, numeric_gradient(wte, loss)) < kRelTol);
  for (std::int64_t i = 0; i < C; ++i) CHECK(dwte[2 * C + i] == 0.0);  // token 2 is absent
}

}  // namespace
}  // namespace conveyor
