// KvDecoder: a KV-cached decode gives, at every position, the logits of a full forward
// (GptStage::forward_logits) over the same prefix, in fp32, for GPT-2 and Llama (rotary at
// each token's own position, grouped-query attention with 2 and with 1 key/value heads,
// llama3 rope scaling), on fresh random weights and tokens (the seed is printed on failure).
// Tolerance: |decode - full| <= 2e-5 * max(1, max |full logit|) per logit; the two differ by
// float rounding only (the cached attention sums in double, the full one in float through
// OpenBLAS), measured at 0.5e-6 to 1.5e-6 of the scale. A token at the wrong position, a
// wrong kv head or a cache row not read is off by O(1).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <span>
#include <string>
#include <stdexcept>
#include <vector>

#include "kernels/model/gpt_stage.hpp"
#include "kernels/model/kv_decoder.hpp"
#include "tests/kernels/model/gpt_test_util.hpp"

namespace conveyor {
namespace {

struct Case {
  std::string name;
  GptConfig config;
};

std::vector<Case> cases() {
  GptConfig gpt2{/*layers=*/2, /*d_model=*/32, /*heads=*/4, /*seq_len=*/24, /*vocab=*/50};
  gpt2.tie_embeddings = true;
  GptConfig gqa = gpt2;
  gqa.tie_embeddings = false;
  gqa.arch = ModelArch::llama;
  gqa.kv_heads = 2;
  gqa.ffn_dim = 48;
  gqa.rope_theta = 500.0;  // fast rotations: a position off by one shows
  GptConfig mqa = gqa;
  mqa.layers = 3;
  mqa.kv_heads = 1;
  mqa.d_model = 48;  // head size 12
  mqa.rope_scaling = RopeScaling::llama3;
  mqa.rope_scaling_factor = 4.0;
  mqa.rope_original_max_position = 16;
  mqa.norm_eps = 1e-6;
  return {{"gpt2", gpt2}, {"llama gqa 4/2", gqa}, {"llama mqa 4/1 llama3 scaling", mqa}};
}

// The stage's parameters, every one moved off its init (norms and biases too) by noise.
void randomize(GptStage& stage, std::mt19937_64& rng) {
  std::normal_distribution<float> noise(0.0f, 0.2f);
  for (Param& p : stage.params())
    for (float& v : p.value.f32_span()) v += noise(rng);
}

std::vector<std::int32_t> random_ids(std::int64_t n, std::int64_t vocab, std::mt19937_64& rng) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
  for (auto& id : ids) id = static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(vocab));
  return ids;
}

// The full forward's logits (T, V) over ids.
Tensor full_logits(GptStage& stage, const std::vector<std::int32_t>& ids) {
  const std::int64_t T = static_cast<std::int64_t>(ids.size());
  Tensor tokens = Tensor::zeros({1, T}, DType::i32);
  std::copy(ids.begin(), ids.end(), tokens.i32());
  return stage.forward_logits(tokens, tokens).logits;  // targets unused here
}

// max |a - b| over row `row` of full (T, V) and decode's row `drow` of (n, V).
double row_difference(const Tensor& full, std::int64_t row, const Tensor& decoded, std::int64_t drow,
                      std::int64_t V) {
  double d = 0;
  for (std::int64_t v = 0; v < V; ++v)
    d = std::max(d, std::abs(static_cast<double>(full.f32()[row * V + v]) - decoded.f32()[drow * V + v]));
  return d;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (float v : t.f32_span()) m = std::max(m, std::abs(static_cast<double>(v)));
  return m;
}

}  // namespace

TEST_CASE("a KV-cached decode gives the full forward's logits at every position") {
  const std::uint64_t seed = std::random_device{}();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  for (const Case& k : cases()) {
    CAPTURE(k.name);
    const GptConfig& c = k.config;
    GptStage stage(c, StageSlice{0, static_cast<int>(c.layers), true, true}, rng());
    randomize(stage, rng);
    const std::int64_t T = c.seq_len, V = c.vocab;
    const auto ids = random_ids(T, V, rng);
    const Tensor full = full_logits(stage, ids);
    const double scale = std::max(1.0, max_abs(full));
    CHECK(scale > 1.0);  // logits big enough that a wrong position or head would show
    const double tolerance = 2e-5 * scale;

    KvDecoder decoder(c, stage.params());
    // A prompt read at once, then tokens one at a time, then a chunk of 3, then singles.
    const std::int64_t prompt = 1 + static_cast<std::int64_t>(rng() % (T / 2));
    std::int64_t at = 0;
    double worst = 0;
    const auto read = [&](std::int64_t n) {
      const Tensor got = decoder.append(std::span(ids).subspan(static_cast<std::size_t>(at), static_cast<std::size_t>(n)));
      REQUIRE(got.shape() == Shape{n, V});
      for (std::int64_t i = 0; i < n; ++i) worst = std::max(worst, row_difference(full, at + i, got, i, V));
      at += n;
      CHECK(decoder.length() == at);
    };
    read(prompt);
    read(1);
    read(std::min<std::int64_t>(3, T - at));
    while (at < T) read(1);
    MESSAGE(k.name << ": worst |decode - full| = " << worst << " at logit scale " << scale);
    CHECK(worst <= tolerance);

    // A new sequence after reset(): the last position only, the same as the full forward's.
    decoder.reset();
    const Tensor last = decoder.append(std::span(ids).first(5), /*last_only=*/true);
    REQUIRE(last.shape() == Shape{1, V});
    CHECK(row_difference(full, 4, last, 0, V) <= tolerance);
  }
}

TEST_CASE("a KV-cached decode sees which tokens came before, not only how many") {
  // Guards against a cache that is written but not read: the last logits after two
  // different prefixes of the same length differ.
  std::mt19937_64 rng(std::random_device{}());
  for (const Case& k : cases()) {
    CAPTURE(k.name);
    GptStage stage(k.config, StageSlice{0, static_cast<int>(k.config.layers), true, true}, rng());
    randomize(stage, rng);
    KvDecoder decoder(k.config, stage.params());
    auto ids = random_ids(6, k.config.vocab, rng);
    const Tensor a = decoder.append(ids, true);
    decoder.reset();
    ids[0] = (ids[0] + 1) % static_cast<std::int32_t>(k.config.vocab);
    const Tensor b = decoder.append(ids, true);
    CHECK(row_difference(a, 0, b, 0, k.config.vocab) > 1e-3);
  }
}

TEST_CASE("a KV-cached decode refuses positions beyond its cache and ids outside the vocabulary") {
  const GptConfig c = cases()[1].config;
  GptStage stage(c, StageSlice{0, static_cast<int>(c.layers), true, true}, 3);
  KvDecoder decoder(c, stage.params());
  std::vector<std::int32_t> ids(static_cast<std::size_t>(c.seq_len), 1);
  decoder.append(std::span(ids).first(ids.size() - 1));
  CHECK_THROWS_AS(decoder.append(std::span(ids).first(2)), std::invalid_argument);
  CHECK(decoder.length() == c.seq_len - 1);
  const std::vector<std::int32_t> bad{static_cast<std::int32_t>(c.vocab)};
  CHECK_THROWS_AS(decoder.append(bad), std::invalid_argument);
  decoder.append(std::span(ids).first(1));  // the last position still fits
  CHECK(decoder.length() == c.seq_len);
  // A cache of fewer positions than seq_len ends there.
  KvDecoder short_cache(c, stage.params(), 5);
  CHECK(short_cache.capacity() == 5);
  CHECK_THROWS_AS(short_cache.append(std::span(ids).first(6)), std::invalid_argument);
  CHECK(short_cache.append(std::span(ids).first(5)).shape() == Shape{5, c.vocab});
  CHECK(KvDecoder(c, stage.params(), 10 * c.seq_len).capacity() == c.seq_len);
}

TEST_CASE("a KV decoder names a parameter it lacks") {
  const GptConfig c = cases()[0].config;
  GptStage first(c, StageSlice{0, 1, true, false}, 3);  // no head
  CHECK_THROWS_WITH_AS(KvDecoder(c, first.params()), doctest::Contains("lm_head.weight"), std::invalid_argument);
}

}  // namespace conveyor
