// The CUDA stage model with model.arch llama (llama_cuda_layers.hpp) against the CPU
// GptStage's Llama (fp32): the same initial weights, close losses and gradients (grouped
// -query attention, rotary with Llama 3.1's scaling, tied and untied heads), the same
// training curve; and the pipeline's properties: a split into slices, between a block's
// halves too, changes no bit (with model.recompute as well), and runs repeat bit for bit.
// Every TEST_CASE name starts with "cuda llama stage model".
#if CONVEYOR_WITH_CUDA
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/model/cuda_stage_model.hpp"
#include "kernels/model/cpu_stage_model.hpp"
#include "kernels/model/gpt_stage.hpp"
#include "tests/kernels/cuda/cuda_stage_test_support.hpp"
#include "tests/kernels/cuda/cuda_test_util.hpp"
#include "tests/kernels/model/gpt_test_util.hpp"

namespace conveyor {
namespace {

using namespace cuda_testing;

const StageSlice kWhole{0, 2, true, true};

TEST_CASE("cuda llama stage model loss and every gradient are close to the CPU GptStage") {
  CONVEYOR_REQUIRE_CUDA_DEVICE(0);
  struct Variant {
    const char* name;
    GptConfig config;
  };
  for (const Variant& v : {Variant{"untied, no rope scaling", llama_config()},
                           Variant{"tied, llama3 rope scaling",
                                   llama_config(true, RopeScaling::llama3)}}) {
    INFO(std::string(v.name));
    const testing::Batch batch = testing::random_batch(kB, kT, v.config.vocab, 21);
    GptStage cpu(v.config, kWhole, kSeed);
    StageForward cf = cpu.forward(batch.tokens, batch.targets, true);
    cpu.backward(*cf.stash, {}, 1.0f);
    CHECK(cf.loss == doctest::Approx(std::log(double(v.config.vocab))).epsilon(0.05));
    for (const AttentionBackend attention : {AttentionBackend::cudnn, AttentionBackend::kernels}) {
      INFO("attention " << std::string(attention == AttentionBackend::cudnn ? "cudnn" : "kernels"));
      CudaStageOptions options = on_device(0);
      options.attention = attention;
      auto gpu = make_cuda_stage_model(v.config, kWhole, kSeed, options);
      // The same initial weights, bf16-rounded (the fp32 master is the CPU's, bit for bit).
      const std::vector<NamedTensor> w = gpu->weights();
      REQUIRE(w.size() == cpu.params().size());
      for (std::size_t i = 0; i < w.size(); ++i) {
        INFO("parameter " << cpu.params()[i].name);
        CHECK(w[i].name == cpu.params()[i].name);
        CHECK(testing::bitwise_equal(w[i].tensor, cpu.params()[i].value));
      }
      StageForward gf = gpu->forward(batch.tokens, batch.targets, true);
      REQUIRE(gf.stash);
      MESSAGE("llama loss cpu " << cf.loss << " gpu " << gf.loss);
      CHECK(std::abs(gf.loss - cf.loss) / cf.loss < 1e-2);
      gpu->backward(*gf.stash, {}, 1.0f);
      CHECK(gf.stash->bytes() == 0);
      const std::vector<NamedTensor> grads = cuda_stage_gradients(*gpu);
      REQUIRE(grads.size() == cpu.params().size());
      for (std::size_t i = 0; i < grads.size(); ++i) {
        const Param& p = cpu.params()[i];
        INFO("parameter " << p.name);
        REQUIRE(grads[i].tensor.shape() == p.grad.shape());
        // bf16 activations through two blocks against the fp32 CPU model: measured on an H100
        // (2026-12-07) up to 0.081 (wte.weight, conveyor's attention kernels; 0.076 with
        // cuDNN's), a little above GPT-2's 0.061 at this width; 0.12 holds them with a
        // margin. An indexing, rotation or grouping error gives errors of order 1.
        CONVEYOR_CHECK_CLOSE(doubles_of(p.grad), values_of(grads[i].tensor), 0.12);
      }
    }
  }
  set_attention_backend(AttentionBackend::cudnn);
}

TEST_CASE("cuda llama stage model split between slices and a block's halves changes no bit") {
  CONVEYOR_REQUIRE_CUDA_DEVICE(0);
  GptConfig config = llama_config();
  config.layers = 3;  // halves 0..6
  const testing::Batch batch = testing::random_batch(kB, kT, config.vocab, 22);
  const ChainRun whole = train_halves(config, {0, 6}, batch, /*split=*/false);
  auto check_same = [&](const GptConfig& c, const std::vector<int>& cuts) {
    check_chain_matches(whole, c, cuts, batch);
  };
  check_same(config, {0, 2, 6});     // whole blocks
  check_same(config, {0, 3, 6});     // block 1 cut after its attention half
  check_same(config, {0, 1, 5, 6});  // a lone half at both ends of the middle slice
  for (const Recompute r : {Recompute::attention, Recompute::full}) {
    GptConfig recomputing = config;
    recomputing.recompute = r;
    check_same(recomputing, {0, 1, 5, 6});
  }
}

TEST_CASE("cuda llama stage model trains like the CPU model for 20 AdamW steps") {
  CONVEYOR_REQUIRE_CUDA_DEVICE(0);
  const GptConfig config = llama_config();
  check_trains_like_cpu(config, testing::random_batch(kB, kT, config.vocab, 23));
}

TEST_CASE("cuda llama stage model gives bitwise identical weights in two identical runs") {
  CONVEYOR_REQUIRE_CUDA_DEVICE(0);
  const GptConfig config = llama_config(true, RopeScaling::llama3);
  const testing::Batch batch = testing::random_batch(kB, kT, config.vocab, 24);
  std::vector<std::vector<double>> losses;
  std::vector<std::vector<NamedTensor>> weights;
  for (int run = 0; run < 2; ++run) {
    auto gpu = make_cuda_stage_model(config, kWhole, kSeed, on_device(0, true, true));
    losses.push_back(train(*gpu, batch, 3, 1e-2));
    weights.push_back(gpu->weights());
  }
  CHECK(losses[0] == losses[1]);
  REQUIRE(weights[0].size() == weights[1].size());
  for (std::size_t i = 0; i < weights[0].size(); ++i) {
    INFO("parameter " << weights[0][i].name);
    CHECK(testing::bitwise_equal(weights[0][i].tensor, weights[1][i].tensor));
  }
}

}  // namespace
}  // namespace conveyor
#endif  // CONVEYOR_WITH_CUDA
