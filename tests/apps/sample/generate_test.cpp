// generate(): greedy generation through the KV cache writes the tokens a full forward over
// the whole text so far picks each time (GptStage::forward_logits, argmax of the last
// position), for GPT-2 and Llama on fresh random weights; it stops when seq_len is full.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "apps/sample/generate.hpp"
#include "kernels/model/gpt_stage.hpp"
#include "kernels/model/kv_decoder.hpp"

using namespace conveyor;

namespace {

GptConfig small(ModelArch arch) {
  GptConfig c{/*layers=*/2, /*d_model=*/32, /*heads=*/4, /*seq_len=*/20, /*vocab=*/40};
  c.arch = arch;
  if (arch == ModelArch::llama) c.kv_heads = 2, c.ffn_dim = 48, c.rope_theta = 300.0;
  return c;
}

GptStage random_model(const GptConfig& c, std::mt19937_64& rng) {
  GptStage stage(c, StageSlice{0, static_cast<int>(c.layers), true, true}, rng());
  std::normal_distribution<float> noise(0.0f, 0.3f);
  for (Param& p : stage.params())
    for (float& v : p.value.f32_span()) v += noise(rng);
  return stage;
}

// The argmax of the full forward's logits at the last of `ids`.
std::int32_t full_greedy(GptStage& stage, const std::vector<std::int32_t>& ids) {
  const auto T = static_cast<std::int64_t>(ids.size());
  Tensor tokens = Tensor::zeros({1, T}, DType::i32);
  std::copy(ids.begin(), ids.end(), tokens.i32());
  const Tensor logits = stage.forward_logits(tokens, tokens).logits;
  const std::int64_t V = logits.dim(2);
  const float* last = logits.f32() + (T - 1) * V;
  return static_cast<std::int32_t>(std::max_element(last, last + V) - last);
}

}  // namespace

TEST_CASE("greedy generation with a KV cache writes what full forwards pick") {
  std::mt19937_64 rng(std::random_device{}());
  for (ModelArch arch : {ModelArch::gpt2, ModelArch::llama}) {
    CAPTURE(model_arch_name(arch));
    const GptConfig c = small(arch);
    GptStage stage = random_model(c, rng);
    std::vector<std::int32_t> prompt = {static_cast<std::int32_t>(rng() % 40), static_cast<std::int32_t>(rng() % 40),
                                        static_cast<std::int32_t>(rng() % 40)};
    KvDecoder decoder(c, stage.params());
    const Generated g = generate(decoder, prompt, 10, SamplingSettings{0.0, 0, 0});
    REQUIRE(g.ids.size() == 10);
    CHECK_FALSE(g.hit_seq_len);
    std::vector<std::int32_t> text = prompt;
    for (std::int32_t id : g.ids) {
      CHECK(id == full_greedy(stage, text));
      text.push_back(id);
    }
  }
}

TEST_CASE("generation stops when the model's seq_len is full, and a seed repeats its text") {
  std::mt19937_64 rng(std::random_device{}());
  const GptConfig c = small(ModelArch::llama);
  GptStage stage = random_model(c, rng);
  KvDecoder decoder(c, stage.params());
  const std::vector<std::int32_t> prompt(15, 3);
  const Generated g = generate(decoder, prompt, 100, SamplingSettings{1.0, 10, 42});
  CHECK(g.hit_seq_len);
  CHECK(g.ids.size() == 6);  // positions 15..19 read back, and one more drawn from position 19
  CHECK(generate(decoder, prompt, 100, SamplingSettings{1.0, 10, 42}).ids == g.ids);
}
