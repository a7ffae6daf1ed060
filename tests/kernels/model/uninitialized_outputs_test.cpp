// GptStage allocates its activations and input gradients uninitialized (no memset): each
// kernel writes its output whole before anything reads it. Poisoning those blocks (every
// float a NaN) must change no bit of the losses, the stage outputs, the input gradients or
// the parameter gradients, for every kind of slice, backward and model.recompute.
#include <doctest/doctest.h>

#include <cmath>

#include "kernels/cpu/threads.hpp"
#include "kernels/model/gpt_stage.hpp"
#include "kernels/tensor/storage.hpp"
#include "tests/kernels/model/gpt_test_util.hpp"

namespace conveyor {
namespace {

using testing::bitwise_equal;
using testing::random_batch;

constexpr std::int64_t kB = 2, kT = 16;

struct Run {
  std::vector<double> losses;   // each micro-batch's
  std::vector<Tensor> outputs;  // each stage's activation, then each stage's input gradient
  std::map<std::string, Tensor> grads;
};

// Two micro-batches forward, then both backward, through `slices`.
Run train(Recompute recompute, const std::vector<StageSlice>& slices, bool split, bool poison) {
  GptConfig config{/*layers=*/3, /*d_model=*/32, /*heads=*/4, /*seq_len=*/16, /*vocab=*/64};
  config.recompute = recompute;
  poison_uninitialized_host(poison);
  auto stages = testing::make_stages(config, slices, /*seed=*/11);
  Run run;
  std::vector<std::vector<std::unique_ptr<StageStash>>> stashes(2);
  for (std::size_t m = 0; m < stashes.size(); ++m)
    run.losses.push_back(testing::chain_forward(
        stages, random_batch(kB, kT, config.vocab, 300 + m), stashes[m], &run.outputs));
  for (auto& stash : stashes)
    testing::chain_backward(stages, stash, 0.5f, split, &run.outputs);
  poison_uninitialized_host(false);
  run.grads = testing::by_name(stages, /*grads=*/true);
  return run;
}

bool finite(const Tensor& t) {
  for (float v : t.f32_span())
    if (!std::isfinite(v)) return false;
  return true;
}

TEST_CASE("poisoned uninitialized activations change no bit of a GptStage's results") {
  set_cpu_kernel_threads(1);
  const std::vector<std::vector<StageSlice>> splits{
      {{0, 3, true, true}},
      {{0, 1, true, false}, {1, 1, false, false}, {2, 1, false, true}},
      {StageSlice::of_halves(0, 3, true, false), StageSlice::of_halves(3, 2, false, false),
       StageSlice::of_halves(5, 1, false, true)}};
  for (const auto& slices : splits)
    for (bool split : {false, true})
      for (Recompute r : {Recompute::none, Recompute::attention, Recompute::full}) {
        CAPTURE(slices.size());
        CAPTURE(split);
        CAPTURE(recompute_name(r));
        const Run plain = train(r, slices, split, /*poison=*/false);
        const Run poisoned = train(r, slices, split, /*poison=*/true);
        CHECK(poisoned.losses == plain.losses);
        // per micro-batch: an activation out of every stage but the last, an input gradient
        // out of every stage but the first
        REQUIRE(plain.outputs.size() == 4 * (slices.size() - 1));
        REQUIRE(poisoned.outputs.size() == plain.outputs.size());
        for (std::size_t i = 0; i < plain.outputs.size(); ++i) {
          CAPTURE(i);
          CHECK(finite(poisoned.outputs[i]));
          CHECK(bitwise_equal(poisoned.outputs[i], plain.outputs[i]));
        }
        REQUIRE(plain.grads.size() == 2 + 3 * 12 + 3);
        for (const auto& [name, grad] : plain.grads) {
          CAPTURE(name);
          CHECK(finite(poisoned.grads.at(name)));
          CHECK(bitwise_equal(poisoned.grads.at(name), grad));
        }
      }
}

}  // namespace
}  // namespace conveyor
