// Resharding in memory (actors/checkpoint/reshard_states.hpp): CPU stages of a small model
// split 3 ways train a step, their captured state is cut for 2 stages and restored, and the
// 2 stages hold, bit for bit, the state of a 2-stage split that trained the same step — and
// go on training identically. GPT-2 and Llama.
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <memory>

#include "actors/checkpoint/checkpoint_error.hpp"
#include "actors/checkpoint/reshard_states.hpp"
#include "kernels/model/param_layout.hpp"
#include "kernels/model/stage_model.hpp"

using namespace conveyor;

namespace {

GptConfig small_model(ModelArch arch) {
  GptConfig c;
  c.arch = arch;
  c.layers = 3;
  c.d_model = 16;
  c.heads = 2;
  c.seq_len = 8;
  c.vocab = 32;
  if (arch == ModelArch::llama) {
    c.kv_heads = 1;
    c.ffn_dim = 24;
  }
  return c;
}

struct Pipeline {
  std::vector<StageSlice> slices;
  std::vector<std::unique_ptr<StageModel>> stages;
};

// One CPU stage model per entry of `halves` (half blocks per stage), the embedding on the
// first, the head on the last, as the runtime cuts the model.
Pipeline make_pipeline(const GptConfig& config, const std::vector<int>& halves, std::uint64_t seed) {
  Pipeline p;
  int first = 0;
  for (std::size_t k = 0; k < halves.size(); ++k) {
    p.slices.push_back(StageSlice::of_halves(first, halves[k], k == 0, k + 1 == halves.size()));
    p.stages.push_back(make_cpu_stage_model(config, p.slices.back(), seed));
    first += halves[k];
  }
  return p;
}

// One training step of 2 micro-batches of 2 sequences through the pipeline: forward stage
// by stage, backward in reverse, then AdamW on every stage. Tokens depend on (step, micro-batch).
void train_step(Pipeline& p, const GptConfig& config, int step) {
  constexpr int kMicroBatches = 2;
  for (int mb = 0; mb < kMicroBatches; ++mb) {
    Tensor tokens = Tensor::zeros(Shape{2, config.seq_len}, DType::i32);
    Tensor targets = Tensor::zeros(Shape{2, config.seq_len}, DType::i32);
    for (std::int64_t i = 0; i < tokens.numel(); ++i) {
      tokens.i32()[i] = static_cast<std::int32_t>((i * 5 + mb * 3 + step * 11) % config.vocab);
      targets.i32()[i] = static_cast<std::int32_t>((i * 5 + mb * 3 + step * 11 + 1) % config.vocab);
    }
    std::vector<std::unique_ptr<StageStash>> stashes;
    Tensor x = tokens;
    for (auto& stage : p.stages) {
      StageForward f = stage->forward(x, targets, /*keep_stash=*/true);
      x = f.activation;
      stashes.push_back(std::move(f.stash));
    }
    Tensor grad;
    for (std::size_t k = p.stages.size(); k-- > 0;)
      grad = p.stages[k]->backward(*stashes[k], grad, 1.0f / kMicroBatches);
  }
  for (auto& stage : p.stages) stage->optimizer_step(AdamWConfig{}, 1e-2, 1.0f);
}

std::vector<std::vector<NamedTensor>> capture(const Pipeline& p) {
  std::vector<std::vector<NamedTensor>> out;
  for (const auto& stage : p.stages) out.push_back(stage->capture_state());
  return out;
}

std::vector<std::vector<checkpoint::TensorSpec>> specs_of(const GptConfig& config, const Pipeline& p) {
  std::vector<std::vector<checkpoint::TensorSpec>> out;
  for (const auto& slice : p.slices) out.push_back(checkpoint::specs_of(stage_param_layout(config, slice)));
  return out;
}

// Every tensor of every stage of `got` equals `want`'s of the same name, bit for bit, and
// the stages hold the same names.
void check_same_state(const Pipeline& got, const Pipeline& want) {
  REQUIRE(got.stages.size() == want.stages.size());
  for (std::size_t k = 0; k < got.stages.size(); ++k) {
    CAPTURE(k);
    CHECK(got.stages[k]->optimizer_steps() == want.stages[k]->optimizer_steps());
    const auto a = got.stages[k]->capture_state();
    const auto b = want.stages[k]->capture_state();
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      CAPTURE(b[i].name);
      REQUIRE(a[i].name == b[i].name);
      REQUIRE(a[i].tensor.shape() == b[i].tensor.shape());
      CHECK(std::memcmp(a[i].tensor.raw(), b[i].tensor.raw(), b[i].tensor.bytes()) == 0);
    }
  }
}

void check_three_to_two(ModelArch arch, const std::vector<int>& to_halves) {
  const GptConfig config = small_model(arch);
  Pipeline three = make_pipeline(config, {2, 2, 2}, 1234);
  train_step(three, config, 0);
  const auto old_states = capture(three);

  Pipeline reference = make_pipeline(config, to_halves, 1234);
  train_step(reference, config, 0);

  Pipeline resharded = make_pipeline(config, to_halves, 99);  // another seed: every value differs
  const auto states = checkpoint::reshard_states(old_states, specs_of(config, resharded), "in memory");
  REQUIRE(states.size() == 2);
  for (std::size_t k = 0; k < 2; ++k)
    resharded.stages[k]->restore_state(states[k], three.stages.front()->optimizer_steps());
  check_same_state(resharded, reference);

  // The restored stages continue exactly as the ones that never moved.
  train_step(resharded, config, 1);
  train_step(reference, config, 1);
  check_same_state(resharded, reference);
}

}  // namespace

TEST_CASE("gpt2 stages split 3 ways, resharded in memory to 2, hold the 2-stage split's state bit for bit") {
  check_three_to_two(ModelArch::gpt2, {4, 2});
  check_three_to_two(ModelArch::gpt2, {3, 3});  // a cut between a block's two halves
}

TEST_CASE("llama stages split 3 ways, resharded in memory to 2, hold the 2-stage split's state bit for bit") {
  check_three_to_two(ModelArch::llama, {4, 2});
  check_three_to_two(ModelArch::llama, {3, 3});
}

TEST_CASE("resharding in memory refuses a lost stage's missing state and a tensor held twice") {
  const GptConfig config = small_model(ModelArch::gpt2);
  Pipeline three = make_pipeline(config, {2, 2, 2}, 1234);
  train_step(three, config, 0);
  auto old_states = capture(three);
  Pipeline two = make_pipeline(config, {4, 2}, 1234);

  // Stage 2's state is gone (its node lost, no copy): every tensor of it is named missing.
  auto survivors = old_states;
  survivors.pop_back();
  try {
    checkpoint::reshard_states(survivors, specs_of(config, two), "snapshots of step 1");
    FAIL("no error");
  } catch (const checkpoint::CheckpointError& e) {
    const std::string what = e.what();
    CHECK(what.find("snapshots of step 1") != std::string::npos);
    INFO(what);
    CHECK(what.find("missing tensor blocks.2.") != std::string::npos);  // block 2 was the lost stage's
    CHECK(what.find("(new stage 1)") != std::string::npos);
  }

  // One stage's state given twice: which copy counts is not chosen silently.
  auto twice = old_states;
  twice.push_back(old_states[1]);
  try {
    checkpoint::reshard_states(twice, specs_of(config, two), "snapshots of step 1");
    FAIL("no error");
  } catch (const checkpoint::CheckpointError& e) {
    CHECK(std::string(e.what()).find("is held by old stages 1 and 3") != std::string::npos);
  }
}
