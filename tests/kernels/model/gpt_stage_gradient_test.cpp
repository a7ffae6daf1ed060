// Finite-difference check of a whole GptStage (embedding + 2 blocks + head) in float.
// Parameters are moved off their initial values (+ Normal(0, 0.3)) so that attention is far
// from uniform and every gradient is well above float noise. Two checks per parameter:
// - the directional derivative along a random Normal direction, eps = 3e-3;
// - the three coordinates with the largest gradient, eps = 1e-3;
// both within 1e-2 relative (|fd - an| / max(|an|, 1e-4)). Observed worst: about 4.5e-3.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

#include "tests/kernels/model/gpt_test_util.hpp"

namespace conveyor {
namespace {

using testing::Batch;
using testing::random_batch;
using testing::random_f32;

constexpr double kEps = 1e-3;
// Along a direction the float loss moves little for the small bias gradients: at 1e-3 its
// rounding alone gave 0.6–1.1% error (by OpenBLAS's Haswell, Prescott and SkylakeX kernels),
// at 1e-2 the truncation 4.7%; 3e-3 balances them (worst 0.45% with each).
constexpr double kDirectionEps = 3e-3;
constexpr double kTol = 1e-2;

double rel_error(double fd, double an) { return std::abs(fd - an) / std::max(std::abs(an), 1e-4); }

TEST_CASE("the whole stage's gradients match finite differences (float, rel tol 1e-2)") {
  const GptConfig config{/*layers=*/2, /*d_model=*/16, /*heads=*/2, /*seq_len=*/8, /*vocab=*/32};
  GptStage stage(config, {0, 2, true, true}, /*seed=*/7);
  std::uint64_t seed = 100;
  for (Param& p : stage.params()) {
    const Tensor noise = random_f32(p.value.shape(), seed++, 0.3);
    for (std::int64_t i = 0; i < p.value.numel(); ++i) p.value.f32()[i] += noise.f32()[i];
  }
  const Batch batch = random_batch(/*B=*/2, /*T=*/8, config.vocab, 5);
  auto loss = [&] { return stage.forward(batch.tokens, batch.targets, false).loss; };

  stage.zero_grads();
  StageForward f = stage.forward(batch.tokens, batch.targets, true);
  CHECK(f.loss == loss());  // evaluation (no stash) computes the same loss
  const Tensor dx = stage.backward(*f.stash, {}, 1.0f);
  CHECK_FALSE(dx.defined());  // the embedding has no input gradient

  for (Param& p : stage.params()) {
    CAPTURE(p.name);
    float* w = p.value.f32();
    const float* g = p.grad.f32();
    const Tensor saved = p.value.clone();

    const Tensor d = random_f32(p.value.shape(), seed++);
    double an = 0;
    for (std::int64_t i = 0; i < d.numel(); ++i) an += double(g[i]) * d.f32()[i];
    for (std::int64_t i = 0; i < d.numel(); ++i) w[i] = saved.f32()[i] + float(kDirectionEps) * d.f32()[i];
    const double up = loss();
    for (std::int64_t i = 0; i < d.numel(); ++i) w[i] = saved.f32()[i] - float(kDirectionEps) * d.f32()[i];
    const double down = loss();
    std::memcpy(p.value.raw(), saved.raw(), saved.bytes());
    CAPTURE(an);
    CHECK(rel_error((up - down) / (2 * kDirectionEps), an) < kTol);

    std::vector<std::int64_t> order(static_cast<std::size_t>(p.grad.numel()));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + std::min<std::size_t>(3, order.size()),
                      order.end(), [&](auto a, auto b) { return std::abs(g[a]) > std::abs(g[b]); });
    for (std::size_t k = 0; k < std::min<std::size_t>(3, order.size()); ++k) {
      const std::int64_t i = order[k];
      CAPTURE(i);
      w[i] = saved.f32()[i] + float(kEps);
      const double up_i = loss();
      w[i] = saved.f32()[i] - float(kEps);
      const double down_i = loss();
      w[i] = saved.f32()[i];
      CHECK(rel_error((up_i - down_i) / (2 * kEps), g[i]) < kTol);
    }
  }
}

}  // namespace
}  // namespace conveyor
