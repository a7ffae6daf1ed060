// Training sanity: the model, AdamW and clipping together memorise one fixed batch.
#include <doctest/doctest.h>

#include <cmath>

#include "kernels/cpu/threads.hpp"
#include "kernels/model/gpt_stage.hpp"
#include "kernels/optim/adamw.hpp"
#include "tests/kernels/model/gpt_test_util.hpp"

namespace conveyor {
namespace {

TEST_CASE("30 AdamW steps on one fixed batch drive the loss down markedly") {
  set_cpu_kernel_threads(1);
  const GptConfig config{/*layers=*/2, /*d_model=*/32, /*heads=*/2, /*seq_len=*/16, /*vocab=*/64};
  GptStage stage(config, {0, 2, true, true}, 11);
  const testing::Batch batch = testing::random_batch(4, 16, config.vocab, 77);
  AdamWState state;
  const AdamWConfig adamw{};
  std::vector<double> losses;
  for (int step = 0; step < 30; ++step) {
    stage.zero_grads();
    StageForward f = stage.forward(batch.tokens, batch.targets, true);
    stage.backward(*f.stash, {}, 1.0f);
    losses.push_back(f.loss);
    double sq = 0;
    for (const Param& p : stage.params()) sq += grad_square_sum(p);
    adamw_step(stage.params(), state, adamw, 1e-2f, clip_scale(std::sqrt(sq), 1.0));
  }
  MESSAGE("loss " << losses.front() << " -> " << losses.back());
  CHECK(losses.front() == doctest::Approx(std::log(64.0)).epsilon(0.05));
  CHECK(losses.back() < 0.3 * losses.front());
}

TEST_CASE("30 AdamW steps on one fixed batch drive a Llama's loss down markedly") {
  set_cpu_kernel_threads(1);
  GptConfig config{/*layers=*/2, /*d_model=*/32, /*heads=*/4, /*seq_len=*/16, /*vocab=*/64};
  config.arch = ModelArch::llama;
  config.kv_heads = 2;
  config.ffn_dim = 64;
  GptStage stage(config, {0, 2, true, true}, 11);
  const testing::Batch batch = testing::random_batch(4, 16, config.vocab, 77);
  AdamWState state;
  std::vector<double> losses;
  for (int step = 0; step < 30; ++step) {
    stage.zero_grads();
    StageForward f = stage.forward(batch.tokens, batch.targets, true);
    stage.backward(*f.stash, {}, 1.0f);
    losses.push_back(f.loss);
    double sq = 0;
    for (const Param& p : stage.params()) sq += grad_square_sum(p);
    adamw_step(stage.params(), state, AdamWConfig{}, 1e-2f, clip_scale(std::sqrt(sq), 1.0));
  }
  MESSAGE("llama loss " << losses.front() << " -> " << losses.back());
  CHECK(losses.front() == doctest::Approx(std::log(64.0)).epsilon(0.05));
  CHECK(losses.back() < 0.3 * losses.front());
}

}  // namespace
}  // namespace conveyor
