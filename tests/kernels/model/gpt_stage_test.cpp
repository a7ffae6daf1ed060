#include "kernels/model/gpt_stage.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <thread>

#include "kernels/cpu/threads.hpp"
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

const GptConfig kConfig{/*layers=*/4, /*d_model=*/32, /*heads=*/4, /*seq_len=*/16, /*vocab=*/64};
constexpr std::int64_t kB = 3, kT = 16;

// Trains `slices` on two micro-batches, returns (losses, gradients by name).
struct Run {
  std::vector<double> losses;
  std::map<std::string, Tensor> grads;
};

Run run_split(const std::vector<StageSlice>& slices, bool split_backward, bool interleave) {
  auto stages = make_stages(kConfig, slices, /*seed=*/42);
  const std::vector<Batch> batches{random_batch(kB, kT, kConfig.vocab, 1),
                                   random_batch(kB, kT, kConfig.vocab, 2)};
  Run run;
  std::vector<std::vector<std::unique_ptr<StageStash>>> stashes(batches.size());
  if (interleave) {  // both forwards first, then both backwards (GPipe order)
    for (std::size_t m = 0; m < batches.size(); ++m)
      run.losses.push_back(chain_forward(stages, batches[m], stashes[m]));
    for (std::size_t m = 0; m < batches.size(); ++m)
      chain_backward(stages, stashes[m], 0.5f, split_backward);
  } else {
    for (std::size_t m = 0; m < batches.size(); ++m) {
      run.losses.push_back(chain_forward(stages, batches[m], stashes[m]));
      chain_backward(stages, stashes[m], 0.5f, split_backward);
    }
  }
  run.grads = by_name(stages, /*grads=*/true);
  return run;
}

// Every loss and gradient of `part` is bitwise that of `whole`.
void check_same_bits(const Run& part, const Run& whole) {
  CHECK(part.losses == whole.losses);
  REQUIRE(part.grads.size() == whole.grads.size());
  for (const auto& [name, grad] : whole.grads) {
    CAPTURE(name);
    CHECK(bitwise_equal(part.grads.at(name), grad));
  }
}

TEST_CASE("a model split into slices gives bitwise the same losses and gradients as one stage") {
  set_cpu_kernel_threads(1);
  const Run whole = run_split({{0, 4, true, true}}, false, false);
  REQUIRE(whole.grads.size() == 2 + 4 * 12 + 3);
  const std::vector<std::vector<StageSlice>> splits{
      {{0, 2, true, false}, {2, 2, false, true}},
      {{0, 1, true, false}, {1, 2, false, false}, {3, 1, false, true}},
      {{0, 0, true, false}, {0, 4, false, false}, {4, 0, false, true}},
      {{0, 1, true, false}, {1, 1, false, false}, {2, 1, false, false}, {3, 1, false, true}},
  };
  for (std::size_t s = 0; s < splits.size(); ++s) {
    for (bool split_backward : {false, true}) {
      for (bool interleave : {false, true}) {
        CAPTURE(s);
        CAPTURE(split_backward);
        CAPTURE(interleave);
        check_same_bits(run_split(splits[s], split_backward, interleave), whole);
      }
    }
  }
}

TEST_CASE("a model cut between a block's attention and MLP halves gives the same bits") {
  set_cpu_kernel_threads(1);
  const Run whole = run_split({{0, 4, true, true}}, false, false);
  using S = StageSlice;
  const std::vector<std::vector<StageSlice>> splits{
      // block 1's attention half on the first slice, its MLP half on the second
      {S::of_halves(0, 3, true, false), S::of_halves(3, 5, false, true)},
      // single halves as slices of their own, and an embedding slice ending mid-block
      {S::of_halves(0, 1, true, false), S::of_halves(1, 1, false, false),
       S::of_halves(2, 5, false, false), S::of_halves(7, 1, false, true)},
      // one slice starts at an MLP half and ends after an attention half
      {S::of_halves(0, 1, true, false), S::of_halves(1, 6, false, false),
       S::of_halves(7, 1, false, true)},
  };
  for (std::size_t s = 0; s < splits.size(); ++s) {
    for (bool split_backward : {false, true}) {
      CAPTURE(s);
      CAPTURE(split_backward);
      check_same_bits(run_split(splits[s], split_backward, /*interleave=*/true), whole);
    }
  }
}

TEST_CASE("a half-block slice holds its halves' parameters and refuses to hold none") {
  const GptStage mlp_first(kConfig, StageSlice::of_halves(3, 2, false, false), 1);
  std::vector<std::string> names;
  for (const Param& p : mlp_first.params()) names.push_back(p.name);
  CHECK(names == std::vector<std::string>{
                     "blocks.1.ln2.weight", "blocks.1.ln2.bias", "blocks.1.mlp.fc1.weight",
                     "blocks.1.mlp.fc1.bias", "blocks.1.mlp.fc2.weight", "blocks.1.mlp.fc2.bias",
                     "blocks.2.ln1.weight", "blocks.2.ln1.bias", "blocks.2.attn.qkv.weight",
                     "blocks.2.attn.qkv.bias", "blocks.2.attn.proj.weight",
                     "blocks.2.attn.proj.bias"});
  StageSlice none{1, 1, false, false};
  none.starts_at_mlp = none.ends_after_attention = true;
  CHECK_THROWS_WITH_AS(GptStage(kConfig, none, 1),
                       doctest::Contains("must hold at least one half block"),
                       std::invalid_argument);
}

TEST_CASE("backward equals backward_input then backward_weight bit for bit") {
  const std::vector<StageSlice> slices{
      {0, 1, true, false}, {1, 2, false, false}, {3, 1, false, true}};
  for (const StageSlice& slice : slices) {
    CAPTURE(slice.first_block);
    GptStage a(kConfig, slice, 3), b(kConfig, slice, 3);
    for (int m = 0; m < 2; ++m) {  // two micro-batches: gradients accumulate
      const Batch batch = random_batch(kB, kT, kConfig.vocab, 10 + m);
      const Tensor input =
          slice.has_embedding ? batch.tokens : random_f32({kB, kT, kConfig.d_model}, 20 + m);
      const Tensor grad_out = random_f32({kB, kT, kConfig.d_model}, 30 + m);
      StageForward fa = a.forward(input, batch.targets, true);
      StageForward fb = b.forward(input, batch.targets, true);
      const Tensor da = a.backward(*fa.stash, grad_out, 0.5f);
      const Tensor db = b.backward_input(*fb.stash, grad_out, 0.5f);
      b.backward_weight(*fb.stash);
      CHECK(da.defined() == !slice.has_embedding);
      if (da.defined()) CHECK(bitwise_equal(da, db));
    }
    for (std::size_t i = 0; i < a.params().size(); ++i) {
      CAPTURE(a.params()[i].name);
      CHECK(bitwise_equal(a.params()[i].grad, b.params()[i].grad));
    }
  }
}

TEST_CASE("weight gradients accumulate across micro-batches until zero_grads") {
  GptStage stage(kConfig, {0, 1, true, true}, 5);
  const Batch batch = random_batch(kB, kT, kConfig.vocab, 1);
  auto step = [&] {
    StageForward f = stage.forward(batch.tokens, batch.targets, true);
    stage.backward(*f.stash, {}, 1.0f);
  };
  step();
  std::vector<Tensor> first;
  for (const Param& p : stage.params()) first.push_back(p.grad.clone());
  step();
  // Biases and norms sum one call's contribution before adding it, and at this size
  // (B*T = 48 rows) so does OpenBLAS for the weights: two equal micro-batches give exactly
  // twice the gradient. The embedding adds row by row, so it matches to rounding.
  for (std::size_t i = 0; i < first.size(); ++i) {
    const Param& p = stage.params()[i];
    CAPTURE(p.name);
    const bool embedding = p.name.starts_with("wte") || p.name.starts_with("wpe");
    float scale = 0;
    for (float x : first[i].f32_span()) scale = std::max(scale, 2.0f * std::abs(x));
    bool doubled = true;
    for (std::int64_t k = 0; k < first[i].numel(); ++k) {
      const float want = 2.0f * first[i].f32()[k], got = p.grad.f32()[k];
      doubled &= embedding ? std::abs(got - want) <= 1e-6f * scale : got == want;
    }
    CHECK(doubled);
  }
  stage.zero_grads();
  step();
  for (std::size_t i = 0; i < first.size(); ++i)
    CHECK(bitwise_equal(stage.params()[i].grad, first[i]));
}

TEST_CASE("stages run concurrently in 4 threads give the same gradients as serially") {
  set_cpu_kernel_threads(1);
  const StageSlice slice{0, 2, true, true};
  const Batch batch = random_batch(kB, kT, kConfig.vocab, 9);
  auto train = [&](GptStage& s) {
    StageForward f = s.forward(batch.tokens, batch.targets, true);
    s.backward(*f.stash, {}, 1.0f);
  };
  GptStage serial(kConfig, slice, 1);
  train(serial);
  std::vector<GptStage> stages;
  for (int t = 0; t < 4; ++t) stages.emplace_back(kConfig, slice, 1);
  std::vector<std::thread> threads;
  for (auto& s : stages) threads.emplace_back([&] { train(s); });
  for (auto& t : threads) t.join();
  for (const auto& s : stages)
    for (std::size_t i = 0; i < s.params().size(); ++i)
      CHECK(bitwise_equal(s.params()[i].grad, serial.params()[i].grad));
}

TEST_CASE("forward without a stash keeps nothing and gives the same output") {
  GptStage mid(kConfig, {1, 2, false, false}, 4);
  const Tensor x = random_f32({kB, kT, kConfig.d_model}, 1);
  StageForward kept = mid.forward(x, {}, true);
  StageForward eval = mid.forward(x, {}, false);
  CHECK(kept.stash != nullptr);
  CHECK(eval.stash == nullptr);
  CHECK(bitwise_equal(kept.activation, eval.activation));
  CHECK_FALSE(eval.activation.shares_storage_with(x));
}

TEST_CASE("a stage accepts sequences shorter than seq_len") {
  GptStage stage(kConfig, {0, 4, true, true}, 4);
  const Batch batch = random_batch(2, 5, kConfig.vocab, 3);
  StageForward f = stage.forward(batch.tokens, batch.targets, true);
  CHECK(f.loss > 0.0);
  stage.backward(*f.stash, {}, 1.0f);
}

TEST_CASE("the stash reports its bytes and frees them after backward_weight") {
  // One middle block: 16C + heads*T + 4 floats per token after forward,
  // 20C + 4 after backward_input, nothing after backward_weight.
  GptStage mid(kConfig, {1, 1, false, false}, 4);
  const std::int64_t C = kConfig.d_model, tokens = kB * kT;
  StageForward f = mid.forward(random_f32({kB, kT, C}, 1), {}, true);
  CHECK(f.stash->bytes() == std::size_t(4 * tokens * (16 * C + kConfig.heads * kT + 4)));
  mid.backward_input(*f.stash, random_f32({kB, kT, C}, 2), 1.0f);
  CHECK(f.stash->bytes() == std::size_t(4 * tokens * (20 * C + 4)));
  mid.backward_weight(*f.stash);
  CHECK(f.stash->bytes() == 0);
}

TEST_CASE("a stash is used once, in order, and only by the stage that made it") {
  GptStage a(kConfig, {1, 1, false, false}, 4), b(kConfig, {1, 1, false, false}, 4);
  const Tensor x = random_f32({kB, kT, kConfig.d_model}, 1);
  StageForward f = a.forward(x, {}, true);
  CHECK_THROWS_AS(b.backward_input(*f.stash, x, 1.0f), std::invalid_argument);
  CHECK_THROWS_AS(a.backward_weight(*f.stash), std::logic_error);
  a.backward(*f.stash, x, 1.0f);
  CHECK_THROWS_AS(a.backward(*f.stash, x, 1.0f), std::logic_error);
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no std::invalid_argument)";
}

TEST_CASE("forward and backward reject a wrong shape or dtype, naming both") {
  GptStage first(kConfig, {0, 1, true, false}, 1), last(kConfig, {3, 1, false, true}, 1);
  const Batch batch = random_batch(kB, kT, kConfig.vocab, 1);
  const Tensor acts = random_f32({kB, kT, kConfig.d_model}, 1);

  std::string m = message_of([&] { first.forward(acts, {}, false); });
  CHECK(m.find("i32 (B, T)") != std::string::npos);
  CHECK(m.find("f32 (3, 16, 32)") != std::string::npos);

  m = message_of(
      [&] { first.forward(random_batch(kB, kT + 1, kConfig.vocab, 1).tokens, {}, false); });
  CHECK(m.find("T <= 16") != std::string::npos);
  CHECK(m.find("i32 (3, 17)") != std::string::npos);

  Tensor bad_tokens = batch.tokens.clone();
  bad_tokens.i32()[4] = static_cast<std::int32_t>(kConfig.vocab);
  m = message_of([&] { first.forward(bad_tokens, {}, false); });
  CHECK(m.find("token id 64") != std::string::npos);

  m = message_of([&] { last.forward(random_f32({kB, kT, 16}, 2), batch.targets, false); });
  CHECK(m.find("f32 (B, T, 32)") != std::string::npos);
  CHECK(m.find("f32 (3, 16, 16)") != std::string::npos);

  m = message_of([&] { last.forward(acts, Tensor::zeros({kB, kT}), false); });
  CHECK(m.find("targets must be i32 (3, 16)") != std::string::npos);
  CHECK(m.find("f32 (3, 16)") != std::string::npos);

  m = message_of([&] { last.forward(acts, Tensor{}, false); });
  CHECK(m.find("empty tensor") != std::string::npos);

  StageForward f = first.forward(batch.tokens, {}, true);
  m = message_of([&] {
    first.backward(*f.stash, random_f32({kB, kT - 1, kConfig.d_model}, 3), 1.0f);
  });
  CHECK(m.find("grad_output must be f32 (3, 16, 32)") != std::string::npos);
  CHECK(m.find("f32 (3, 15, 32)") != std::string::npos);
  first.backward(*f.stash, random_f32({kB, kT, kConfig.d_model}, 3), 1.0f);  // still usable

  CHECK_THROWS_AS(GptStage(kConfig, {3, 2, false, false}, 1), std::invalid_argument);
  CHECK_THROWS_AS(GptStage(kConfig, {2, 0, false, false}, 1), std::invalid_argument);
  CHECK_THROWS_AS(GptStage(GptConfig{4, 30, 4, 16, 64}, {0, 1, true, false}, 1),
                  std::invalid_argument);
}

TEST_CASE("params come in the global order with decay only on linear weights and the head") {
  GptStage stage(GptConfig{2, 8, 2, 4, 16}, {0, 2, true, true}, 1);
  std::vector<std::string> names;
  std::vector<std::string> decayed;
  for (const Param& p : stage.params()) {
    names.push_back(p.name);
    if (p.decay) decayed.push_back(p.name);
    CHECK(p.grad.shape() == p.value.shape());
  }
  const std::vector<std::string> block0{
      "blocks.0.ln1.weight",    "blocks.0.ln1.bias",         "blocks.0.attn.qkv.weight",
      "blocks.0.attn.qkv.bias", "blocks.0.attn.proj.weight", "blocks.0.attn.proj.bias",
      "blocks.0.ln2.weight",    "blocks.0.ln2.bias",         "blocks.0.mlp.fc1.weight",
      "blocks.0.mlp.fc1.bias",  "blocks.0.mlp.fc2.weight",   "blocks.0.mlp.fc2.bias"};
  REQUIRE(names.size() == 2 + 24 + 3);
  CHECK(names[0] == "wte.weight");
  CHECK(names[1] == "wpe.weight");
  for (std::size_t i = 0; i < block0.size(); ++i) CHECK(names[2 + i] == block0[i]);
  CHECK(names[14] == "blocks.1.ln1.weight");
  CHECK(names[26] == "ln_f.weight");
  CHECK(names[27] == "ln_f.bias");
  CHECK(names[28] == "lm_head.weight");
  CHECK(decayed == std::vector<std::string>{"blocks.0.attn.qkv.weight", "blocks.0.attn.proj.weight",
                                            "blocks.0.mlp.fc1.weight", "blocks.0.mlp.fc2.weight",
                                            "blocks.1.attn.qkv.weight", "blocks.1.attn.proj.weight",
                                            "blocks.1.mlp.fc1.weight", "blocks.1.mlp.fc2.weight",
                                            "lm_head.weight"});
  CHECK(stage.params()[28].value.shape() == Shape{16, 8});
  CHECK(stage.params()[1].value.shape() == Shape{4, 8});
  CHECK(stage.params()[2 + 8].value.shape() == Shape{32, 8});  // fc1 (4C, C)
}

TEST_CASE("forward FLOPs per token count the weight matmuls and attention") {
  const GptConfig c{2, 64, 4, 128, 256};
  // 2 * (12 C^2 per layer + V C) + 4 T C per layer
  CHECK(gpt_forward_flops_per_token(c) ==
        2.0 * (12.0 * 64 * 64 * 2 + 256.0 * 64) + 2 * 4.0 * 128 * 64);
}

}  // namespace
}  // namespace conveyor
