// GptStage with model.arch llama (llama_layers.hpp in the shared skeleton): bitwise the same
// losses and gradients for any split, whole blocks or halves, fused or split backward and
// every model.recompute; its parameters, their init and the memory it holds; grouped-query
// attention and llama3 rope scaling.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/threads.hpp"
#include "kernels/model/gpt_stage.hpp"
#include "kernels/model/param_layout.hpp"
#include "kernels/tensor/storage.hpp"
#include "tests/kernels/model/gpt_test_util.hpp"

namespace conveyor {
namespace {

using testing::Batch;
using testing::bitwise_equal;
using testing::by_name;
using testing::chain_backward;
using testing::chain_forward;
using testing::make_stages;
using testing::random_batch;
using testing::random_f32;

constexpr std::int64_t kB = 2, kT = 16;

// 4 query heads of size 8 on 2 key/value heads; llama3 scaling over an original context of
// 8 positions: of the inverse frequencies 1, 0.1, 0.01, 0.001 the first is blended, the
// others divided by the factor.
GptConfig llama(Recompute recompute = Recompute::none) {
  GptConfig c{/*layers=*/4, /*d_model=*/32, /*heads=*/4, /*seq_len=*/16, /*vocab=*/64};
  c.arch = ModelArch::llama;
  c.kv_heads = 2;
  c.ffn_dim = 48;
  c.rope_scaling = RopeScaling::llama3;
  c.rope_original_max_position = 8;
  c.recompute = recompute;
  return c;
}

struct Run {
  std::vector<double> losses;
  std::vector<Tensor> outputs;  // each stage's activation, then each stage's input gradient
  std::map<std::string, Tensor> grads;
};

// Three micro-batches through `slices`: all forwards, then all backwards (GPipe order, so
// every stash is held while the others run).
Run train(const GptConfig& config, const std::vector<StageSlice>& slices, bool split_backward) {
  auto stages = make_stages(config, slices, /*seed=*/42);
  std::vector<std::vector<std::unique_ptr<StageStash>>> stashes(3);
  Run run;
  for (std::size_t m = 0; m < stashes.size(); ++m)
    run.losses.push_back(chain_forward(stages, random_batch(kB, kT, config.vocab, 10 + m),
                                       stashes[m], &run.outputs));
  for (auto& stash : stashes)
    chain_backward(stages, stash, 1.0f / 3.0f, split_backward, &run.outputs);
  run.grads = by_name(stages, /*grads=*/true);
  return run;
}

void check_same_bits(const Run& got, const Run& want) {
  CHECK(got.losses == want.losses);
  REQUIRE(got.grads.size() == want.grads.size());
  for (const auto& [name, grad] : want.grads) {
    CAPTURE(name);
    CHECK(bitwise_equal(got.grads.at(name), grad));
  }
}

using S = StageSlice;
const std::vector<std::vector<StageSlice>> kSplits{
    {{0, 2, true, false}, {2, 2, false, true}},
    {{0, 0, true, false}, {0, 4, false, false}, {4, 0, false, true}},
    // cut inside block 1; a slice of one MLP half and the next block's attention half
    {S::of_halves(0, 3, true, false), S::of_halves(3, 2, false, false),
     S::of_halves(5, 3, false, true)},
    {S::of_halves(0, 1, true, false), S::of_halves(1, 6, false, false),
     S::of_halves(7, 1, false, true)},
};

TEST_CASE(
    "a Llama split into slices, whole blocks or halves, gives bitwise the losses and gradients of "
    "one stage") {
  set_cpu_kernel_threads(1);
  const Run whole = train(llama(), {{0, 4, true, true}}, false);
  REQUIRE(whole.grads.size() == 1 + 4 * 6 + 2);
  for (std::size_t s = 0; s < kSplits.size(); ++s)
    for (bool split_backward : {false, true}) {
      CAPTURE(s);
      CAPTURE(split_backward);
      check_same_bits(train(llama(), kSplits[s], split_backward), whole);
    }
}

TEST_CASE("model.recompute attention and full give a Llama the bits of none") {
  set_cpu_kernel_threads(1);
  for (const auto& slices : {kSplits[0], kSplits[2]}) {
    for (bool split_backward : {false, true}) {
      CAPTURE(slices.size());
      CAPTURE(split_backward);
      const Run kept = train(llama(), slices, split_backward);
      for (Recompute r : {Recompute::attention, Recompute::full}) {
        CAPTURE(recompute_name(r));
        const Run again = train(llama(r), slices, split_backward);
        check_same_bits(again, kept);
        REQUIRE(again.outputs.size() == kept.outputs.size());
        for (std::size_t i = 0; i < kept.outputs.size(); ++i)
          CHECK(bitwise_equal(again.outputs[i], kept.outputs[i]));
      }
    }
  }
}

TEST_CASE("what a Llama block holds after forward and after backward_input, by model.recompute") {
  // Per token, W = C + 2 kv_heads hs the qkv width: none 3C + W + heads*T + 1 (attention)
  // and 2C + 3F + 1 (MLP); attention keeps x and the MLP half, 3C + 3F + 1; full C. After
  // backward_input 5C + W + 1 and 4C + 3F + 1 for every setting.
  const GptConfig base = llama();
  const std::int64_t C = base.d_model, W = C + 2 * 2 * 8, F = base.ffn_dim, tokens = kB * kT;
  const std::pair<Recompute, std::int64_t> held[] = {
      {Recompute::none, 3 * C + W + base.heads * kT + 1 + 2 * C + 3 * F + 1},
      {Recompute::attention, 3 * C + 3 * F + 1},
      {Recompute::full, C}};
  for (const auto& [r, floats] : held) {
    CAPTURE(recompute_name(r));
    GptStage mid(llama(r), {1, 1, false, false}, 4);
    StageForward f = mid.forward(random_f32({kB, kT, C}, 1), {}, true);
    CHECK(f.stash->bytes() == std::size_t(4 * tokens * floats));
    mid.backward_input(*f.stash, random_f32({kB, kT, C}, 2), 1.0f);
    CHECK(f.stash->bytes() == std::size_t(4 * tokens * (5 * C + W + 1 + 4 * C + 3 * F + 1)));
    mid.backward_weight(*f.stash);
    CHECK(f.stash->bytes() == 0);
  }
}

TEST_CASE("a Llama's parameters: names for a Hugging Face import, fused shapes, decay and init") {
  GptConfig config = llama();
  const GptStage stage(config, {0, 4, true, true}, 3);
  std::vector<std::string> names, decayed;
  for (const Param& p : stage.params()) {
    names.push_back(p.name);
    if (p.decay) decayed.push_back(p.name);
  }
  REQUIRE(names.size() == 1 + 4 * 6 + 2);
  CHECK(std::vector<std::string>(names.begin(), names.begin() + 7) ==
        std::vector<std::string>{"wte.weight", "blocks.0.attn_norm.weight",
                                 "blocks.0.attn.qkv.weight", "blocks.0.attn.o.weight",
                                 "blocks.0.mlp_norm.weight", "blocks.0.mlp.gate_up.weight",
                                 "blocks.0.mlp.down.weight"});
  CHECK(names[25] == "norm_f.weight");
  CHECK(names[26] == "lm_head.weight");
  CHECK(decayed.size() == 4 * 4 + 1);  // the four block weights and the untied head
  std::map<std::string, const Param*> at;
  for (const Param& q : stage.params()) at[q.name] = &q;
  // q: 4 heads of 8, k and v: 2 heads of 8 each; gate and up stacked.
  CHECK(at["blocks.2.attn.qkv.weight"]->value.shape() == Shape{32 + 2 * 16, 32});
  CHECK(at["blocks.2.attn.o.weight"]->value.shape() == Shape{32, 32});
  CHECK(at["blocks.2.mlp.gate_up.weight"]->value.shape() == Shape{2 * 48, 32});
  CHECK(at["blocks.2.mlp.down.weight"]->value.shape() == Shape{32, 48});
  for (float x : at["blocks.1.mlp_norm.weight"]->value.f32_span()) CHECK(x == 1.0f);
  auto stddev = [](const Tensor& t) {
    double s = 0, s2 = 0;
    for (float x : t.f32_span()) {
      s += x;
      s2 += double(x) * x;
    }
    const double n = double(t.numel()), m = s / n;
    return std::sqrt(s2 / n - m * m);
  };
  CHECK(stddev(at["blocks.1.mlp.gate_up.weight"]->value) == doctest::Approx(0.02).epsilon(0.1));
  CHECK(stddev(at["blocks.1.mlp.down.weight"]->value) ==
        doctest::Approx(0.02 / std::sqrt(8.0)).epsilon(0.1));

  // Tied: the head is drawn as wte and not decayed.
  config.tie_embeddings = true;
  const GptStage tied(config, {0, 4, true, true}, 3);
  CHECK(bitwise_equal(tied.params().front().value, tied.params().back().value));
  CHECK_FALSE(tied.params().back().decay);
}

TEST_CASE("a Llama's init depends only on seed and name, not on the slice") {
  const auto whole = by_name(make_stages(llama(), {{0, 4, true, true}}, 9), false);
  const auto parts = by_name(make_stages(llama(), kSplits[2], 9), false);
  REQUIRE(parts.size() == whole.size());
  for (const auto& [name, value] : whole) {
    CAPTURE(name);
    CHECK(bitwise_equal(parts.at(name), value));
  }
}

TEST_CASE("the layout is what a Llama stage holds, for whole blocks, half blocks and a tied head") {
  GptConfig config = llama();
  for (bool tied : {false, true}) {
    config.tie_embeddings = tied;
    for (const auto& slice : {S::of_halves(0, 8, true, true), S::of_halves(0, 3, true, false),
                              S::of_halves(3, 2, false, false), S::of_halves(5, 3, false, true)}) {
      const auto layout = stage_param_layout(config, slice);
      const GptStage stage(config, slice, 11);
      REQUIRE(layout.size() == stage.params().size());
      for (std::size_t i = 0; i < layout.size(); ++i) {
        CAPTURE(layout[i].name);
        CHECK(layout[i].name == stage.params()[i].name);
        CHECK(layout[i].shape == stage.params()[i].value.shape());
        CHECK(layout[i].decay == stage.params()[i].decay);
      }
    }
  }
}

TEST_CASE("grouped-query attention: fewer key/value heads shrink qkv and change the model") {
  GptConfig mha = llama();
  mha.kv_heads = 0;  // heads
  const Batch batch = random_batch(kB, kT, mha.vocab, 1);
  GptStage a(mha, {0, 1, true, true}, 5), g(llama(), {0, 1, true, true}, 5);
  CHECK(a.params()[2].value.shape() == Shape{3 * 32, 32});
  CHECK(g.params()[2].value.shape() == Shape{2 * 32, 32});
  CHECK(a.forward(batch.tokens, batch.targets, false).loss !=
        g.forward(batch.tokens, batch.targets, false).loss);
}

TEST_CASE(
    "rotary positions: position 0 is not rotated, so llama3 scaling changes the loss from position "
    "1 on") {
  GptConfig plain = llama();
  plain.rope_scaling = RopeScaling::none;
  plain.rope_original_max_position = 8192;
  GptStage scaled(llama(), {0, 4, true, true}, 6), unscaled(plain, {0, 4, true, true}, 6);
  const Batch one = random_batch(kB, 1, plain.vocab, 2),
              many = random_batch(kB, kT, plain.vocab, 2);
  CHECK(scaled.forward(one.tokens, one.targets, false).loss ==
        unscaled.forward(one.tokens, one.targets, false).loss);
  CHECK(scaled.forward(many.tokens, many.targets, false).loss !=
        unscaled.forward(many.tokens, many.targets, false).loss);
}

TEST_CASE("a Llama stage refuses heads not a multiple of kv_heads, and an odd head size") {
  GptConfig c = llama();
  c.kv_heads = 3;
  CHECK_THROWS_WITH_AS(GptStage(c, {0, 1, true, true}, 1), doctest::Contains("kv_heads 3"),
                       std::invalid_argument);
  c = llama();
  c.d_model = 36;  // head size 9
  c.kv_heads = 4;
  CHECK_THROWS_WITH_AS(GptStage(c, {0, 1, true, true}, 1), doctest::Contains("odd"),
                       std::invalid_argument);
}

TEST_CASE("poisoned uninitialized activations change no bit of a Llama stage's results") {
  set_cpu_kernel_threads(1);
  for (Recompute r : {Recompute::none, Recompute::full}) {
    CAPTURE(recompute_name(r));
    const Run plain = train(llama(r), kSplits[2], /*split_backward=*/true);
    poison_uninitialized_host(true);
    const Run poisoned = train(llama(r), kSplits[2], /*split_backward=*/true);
    poison_uninitialized_host(false);
    check_same_bits(poisoned, plain);
    REQUIRE(poisoned.outputs.size() == plain.outputs.size());
    for (std::size_t i = 0; i < plain.outputs.size(); ++i) {
      CAPTURE(i);
      CHECK(bitwise_equal(poisoned.outputs[i], plain.outputs[i]));
    }
  }
}

TEST_CASE(
    "forward FLOPs per token of a Llama count qkv, o, gate_up, down, attention and the head") {
  const GptConfig c = llama();
  const double C = 32, W = 64, F = 48, T = 16, V = 64, L = 4;
  CHECK(gpt_forward_flops_per_token(c) ==
        L * (2.0 * (C * W + C * C + 3.0 * C * F) + 4.0 * T * C) + 2.0 * V * C);
}

}  // namespace
}  // namespace conveyor
