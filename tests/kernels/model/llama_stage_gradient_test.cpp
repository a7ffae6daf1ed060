// Finite-difference check of a whole Llama stage (embedding + 2 blocks + head) in float,
// with grouped-query attention (4 query heads on 2 key/value heads) and llama3 rope scaling
// (original context 16 with head size 4: one frequency blended, one divided by the factor),
// so rotary, its backward and the scaled tables are all under test. As the GPT-2 check
// (gpt_stage_gradient_test.cpp): parameters moved off their init (+ Normal(0, 0.3)), the
// directional derivative along a random direction and the three largest coordinates
// (eps 1e-3), within 1e-2 relative. The first block's attention is stiffer than GPT-2's
// (its q and k see the embedding through RMSNorm alone): along a direction, central
// differences at 3e-3 were 6.2% off for wte and 2.5% for the first qkv, converging as
// eps^2 (0.7% at 1e-3, 0.02% at 3e-4), so the directional derivative is Richardson's
// extrapolation (9 D(eps / 3) - D(eps)) / 8 of central differences at eps = 3e-3 and 1e-3,
// which cancels the eps^2 term and keeps GPT-2's step sizes against float rounding.
// Observed worst: about 0.1%.
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
constexpr double kDirectionEps = 3e-3;  // and kDirectionEps / 3, extrapolated (see above)
constexpr double kTol = 1e-2;

double rel_error(double fd, double an) { return std::abs(fd - an) / std::max(std::abs(an), 1e-4); }

GptConfig tiny_llama() {
  GptConfig c{/*layers=*/2, /*d_model=*/16, /*heads=*/4, /*seq_len=*/8, /*vocab=*/32};
  c.arch = ModelArch::llama;
  c.kv_heads = 2;
  c.ffn_dim = 24;
  c.rope_scaling = RopeScaling::llama3;
  c.rope_original_max_position = 16;
  return c;
}

TEST_CASE(
    "a whole Llama stage's gradients match finite differences (GQA, llama3 rope, float, rel tol "
    "1e-2)") {
  const GptConfig config = tiny_llama();
  GptStage stage(config, {0, 2, true, true}, /*seed=*/7);
  REQUIRE(stage.params().size() == 1 + 2 * 6 + 2);
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

  double worst = 0;  // of the directional checks
  for (Param& p : stage.params()) {
    CAPTURE(p.name);
    float* w = p.value.f32();
    const float* g = p.grad.f32();
    const Tensor saved = p.value.clone();

    const Tensor d = random_f32(p.value.shape(), seed++);
    double an = 0;
    for (std::int64_t i = 0; i < d.numel(); ++i) an += double(g[i]) * d.f32()[i];
    auto central = [&](double eps) {
      for (std::int64_t i = 0; i < d.numel(); ++i) w[i] = saved.f32()[i] + float(eps) * d.f32()[i];
      const double up = loss();
      for (std::int64_t i = 0; i < d.numel(); ++i) w[i] = saved.f32()[i] - float(eps) * d.f32()[i];
      const double down = loss();
      std::memcpy(p.value.raw(), saved.raw(), saved.bytes());
      return (up - down) / (2 * eps);
    };
    const double fd = (9 * central(kDirectionEps / 3) - central(kDirectionEps)) / 8;
    CAPTURE(an);
    CAPTURE(fd);
    worst = std::max(worst, rel_error(fd, an));
    CHECK(rel_error(fd, an) < kTol);

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
  MESSAGE("worst directional relative error " << worst);
}

}  // namespace
}  // namespace conveyor
