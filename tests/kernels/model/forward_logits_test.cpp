// GptStage::forward_logits: the loss is forward()'s, bit for bit, and the logits are the ones
// that loss was computed from (their cross-entropy, recomputed here in double), for both
// architectures; a slice without the head is refused.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>

#include "kernels/model/gpt_stage.hpp"
#include "tests/kernels/model/gpt_test_util.hpp"

namespace conveyor {
namespace {

using testing::random_batch;

GptConfig small(ModelArch arch) {
  GptConfig c{/*layers=*/2, /*d_model=*/32, /*heads=*/4, /*seq_len=*/16, /*vocab=*/50};
  c.arch = arch;
  if (arch == ModelArch::llama) {
    c.kv_heads = 2;
    c.ffn_dim = 48;
  }
  return c;
}

// Mean over the (B, T) tokens of -log softmax(logits)[target], in double.
double cross_entropy_of(const Tensor& logits, const Tensor& targets, std::int64_t V) {
  const std::int64_t N = targets.numel();
  double sum = 0.0;
  for (std::int64_t i = 0; i < N; ++i) {
    const float* row = logits.f32() + i * V;
    double max = row[0];
    for (std::int64_t v = 1; v < V; ++v) max = std::max(max, static_cast<double>(row[v]));
    double z = 0.0;
    for (std::int64_t v = 0; v < V; ++v) z += std::exp(row[v] - max);
    sum += max + std::log(z) - row[targets.i32()[i]];
  }
  return sum / static_cast<double>(N);
}

}  // namespace

TEST_CASE("forward_logits returns forward's loss bit for bit and the logits it came from") {
  for (ModelArch arch : {ModelArch::gpt2, ModelArch::llama}) {
    CAPTURE(model_arch_name(arch));
    const GptConfig c = small(arch);
    const StageSlice whole{0, static_cast<int>(c.layers), true, true};
    GptStage stage(c, whole, 7);
    const auto batch = random_batch(3, 12, c.vocab, 5);
    const double loss = stage.forward(batch.tokens, batch.targets, /*keep_stash=*/false).loss;
    const StageLogits out = stage.forward_logits(batch.tokens, batch.targets);
    CHECK(out.loss == loss);
    REQUIRE(out.logits.shape() == Shape{3, 12, c.vocab});
    CHECK(cross_entropy_of(out.logits, batch.targets, c.vocab) == doctest::Approx(loss).epsilon(1e-6));
    // Logits, not probabilities: some are negative.
    bool negative = false;
    for (float v : out.logits.f32_span()) negative = negative || v < 0;
    CHECK(negative);
  }
}

TEST_CASE("forward_logits refuses a slice without the head") {
  const GptConfig c = small(ModelArch::llama);
  GptStage first(c, StageSlice{0, 1, true, false}, 7);
  const auto batch = random_batch(1, 4, c.vocab, 5);
  CHECK_THROWS_AS(first.forward_logits(batch.tokens, batch.targets), std::invalid_argument);
}

}  // namespace conveyor
