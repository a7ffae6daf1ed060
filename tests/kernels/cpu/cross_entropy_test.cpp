#include "kernels/cpu/cross_entropy.hpp"

#include <doctest/doctest.h>

#include "tests/kernels/cpu/gradient_check.hpp"

namespace conveyor {
namespace {

using testing::kRelTol;
using testing::max_rel_error;
using testing::numeric_gradient;
using testing::random_vector;

constexpr std::int64_t N = 4, V = 6;
const std::vector<std::int32_t> kTargets{0, 5, 2, 2};

TEST_CASE("cross-entropy of uniform logits is log V") {
  std::vector<double> logits(N * V, 0.7), probs(N * V);
  const double loss =
      cpu::cross_entropy_forward(probs.data(), logits.data(), kTargets.data(), N, V);
  CHECK(loss == doctest::Approx(std::log(double(V))).epsilon(1e-14));
  for (double p : probs) CHECK(p == doctest::Approx(1.0 / V).epsilon(1e-14));
}

TEST_CASE("cross-entropy backward matches finite differences (double, rel tol 1e-6)") {
  auto logits = random_vector(N * V, 1, 3.0);
  const double loss_scale = 0.25;
  auto loss = [&] {
    std::vector<double> probs(N * V);
    return loss_scale *
           cpu::cross_entropy_forward(probs.data(), logits.data(), kTargets.data(), N, V);
  };
  // In place, as the model runs it: logits -> probabilities -> dlogits in one buffer.
  std::vector<double> buf = logits;
  cpu::cross_entropy_forward(buf.data(), buf.data(), kTargets.data(), N, V);
  cpu::cross_entropy_backward_input(buf.data(), buf.data(), kTargets.data(), loss_scale / N, N, V);
  CHECK(max_rel_error(buf, numeric_gradient(logits, loss)) < kRelTol);
}

}  // namespace
}  // namespace conveyor
