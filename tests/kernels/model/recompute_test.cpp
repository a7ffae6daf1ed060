// model.recompute on the CPU model: less held between forward and backward, the same bits.
#include <doctest/doctest.h>

#include "kernels/cpu/threads.hpp"
#include "kernels/model/gpt_stage.hpp"
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

GptConfig config_with(Recompute recompute) {
  GptConfig c{/*layers=*/3, /*d_model=*/32, /*heads=*/4, /*seq_len=*/16, /*vocab=*/64};
  c.recompute = recompute;
  return c;
}

struct Run {
  std::vector<double> losses;
  std::map<std::string, Tensor> grads;
};

// Three micro-batches through `slices`: all forwards, then all backwards (GPipe order, so
// every stash is held while the others run), with backward split into I and W or not.
Run train(Recompute recompute, const std::vector<StageSlice>& slices, bool split_backward) {
  const GptConfig config = config_with(recompute);
  auto stages = make_stages(config, slices, /*seed=*/7);
  std::vector<std::vector<std::unique_ptr<StageStash>>> stashes(3);
  Run run;
  for (std::size_t m = 0; m < stashes.size(); ++m)
    run.losses.push_back(
        chain_forward(stages, random_batch(kB, kT, config.vocab, 100 + m), stashes[m]));
  for (auto& stash : stashes) chain_backward(stages, stash, 1.0f / 3.0f, split_backward);
  run.grads = by_name(stages, /*grads=*/true);
  return run;
}

TEST_CASE("model.recompute attention and full give the losses and gradients of none, bit for bit") {
  set_cpu_kernel_threads(1);
  const std::vector<std::vector<StageSlice>> splits{
      {{0, 3, true, true}},
      {{0, 1, true, false}, {1, 1, false, false}, {2, 1, false, true}},
      // cut inside block 1, and a slice of block 2's attention half alone
      {StageSlice::of_halves(0, 3, true, false), StageSlice::of_halves(3, 2, false, false),
       StageSlice::of_halves(5, 1, false, true)}};
  for (const auto& slices : splits) {
    for (bool split_backward : {false, true}) {
      CAPTURE(slices.size());
      CAPTURE(split_backward);
      const Run kept = train(Recompute::none, slices, split_backward);
      REQUIRE(kept.grads.size() == 2 + 3 * 12 + 3);
      for (Recompute r : {Recompute::attention, Recompute::full}) {
        CAPTURE(recompute_name(r));
        const Run again = train(r, slices, split_backward);
        CHECK(again.losses == kept.losses);
        for (const auto& [name, grad] : kept.grads) {
          CAPTURE(name);
          CHECK(bitwise_equal(again.grads.at(name), grad));
        }
      }
    }
  }
}

TEST_CASE("model.recompute: a middle block's input gradient is bitwise that of none") {
  const StageSlice mid{1, 1, false, false};
  const Tensor input = random_f32({kB, kT, 32}, 3), grad_out = random_f32({kB, kT, 32}, 4);
  GptStage kept(config_with(Recompute::none), mid, 9);
  StageForward fk = kept.forward(input, {}, true);
  const Tensor want = kept.backward(*fk.stash, grad_out, 1.0f);
  for (Recompute r : {Recompute::attention, Recompute::full}) {
    CAPTURE(recompute_name(r));
    GptStage stage(config_with(r), mid, 9);
    StageForward f = stage.forward(input, {}, true);
    CHECK(bitwise_equal(f.activation, fk.activation));
    CHECK(bitwise_equal(stage.backward(*f.stash, grad_out, 1.0f), want));
  }
}

TEST_CASE("model.recompute: what a block holds after forward and after backward_input") {
  // After forward, per token: none 16C + heads*T + 4 floats, attention 11C + 2 (x, res2,
  // ln2 and its statistics, fc1, GELU), full C (the block input). After backward_input
  // the recomputed activations and the output gradients: 20C + 4 for every setting.
  const GptConfig base = config_with(Recompute::none);
  const std::int64_t C = base.d_model, tokens = kB * kT;
  const std::pair<Recompute, std::int64_t> held[] = {
      {Recompute::none, 16 * C + base.heads * kT + 4},
      {Recompute::attention, 11 * C + 2},
      {Recompute::full, C}};
  for (const auto& [r, floats] : held) {
    CAPTURE(recompute_name(r));
    GptStage mid(config_with(r), {1, 1, false, false}, 4);
    StageForward f = mid.forward(random_f32({kB, kT, C}, 1), {}, true);
    CHECK(f.stash->bytes() == std::size_t(4 * tokens * floats));
    mid.backward_input(*f.stash, random_f32({kB, kT, C}, 2), 1.0f);
    CHECK(f.stash->bytes() == std::size_t(4 * tokens * (20 * C + 4)));
    mid.backward_weight(*f.stash);
    CHECK(f.stash->bytes() == 0);
  }
}

TEST_CASE("model.recompute names read and print back") {
  for (const auto& name : known_recompute_names()) {
    const auto r = parse_recompute(name);
    REQUIRE(r);
    CHECK(recompute_name(*r) == name);
  }
  CHECK_FALSE(parse_recompute("selective"));
  CHECK_FALSE(parse_recompute(""));
}

}  // namespace
}  // namespace conveyor
