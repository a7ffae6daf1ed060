#include <doctest/doctest.h>

#include <string>
#include <utility>

#include "actors/runtime/layer_profiler.hpp"
#include "actors/plan/schedule/cost_model.hpp"
#include "actors/plan/schedule/partitioner.hpp"
#include "kernels/common/error.hpp"

using conveyor::GptConfig;
using conveyor::ModelArch;
using conveyor::model_arch_name;
using conveyor::Recompute;
using conveyor::recompute_name;
using conveyor::ProfileOptions;
using conveyor::profile_layers;
using namespace conveyor::sched;

TEST_CASE("The profile has one unit per half block, positive times and one block's halves for every block") {
  const GptConfig config{5, 32, 4, 16, 300};
  ProfileOptions options;
  options.micro_batch_size = 2;
  const ModelCosts costs = profile_layers(config, options);
  REQUIRE(costs.units.size() == 12);
  CHECK(costs.blocks() == 5);
  CHECK(costs.halves() == 10);
  for (std::size_t u = 0; u < costs.units.size(); ++u) {
    CAPTURE(u);
    CHECK(costs.units[u].f_us > 0);
    CHECK(costs.units[u].w_us > 0);
    if (u > 0) CHECK(costs.units[u].i_us > 0);  // the embedding has no input gradient to compute
  }
  for (int u = 3; u <= 10; ++u) {  // attention halves are odd units, MLP halves even
    const UnitCost& first = costs.units[u % 2 ? 1 : 2];
    CHECK(costs.units[u].f_us == first.f_us);
    CHECK(costs.units[u].activation_bytes == first.activation_bytes);
  }
  CHECK(costs.units[1].param_bytes < costs.units[2].param_bytes);  // 4C² + 6C against 8C² + 7C
  CHECK(costs.source.find("measured on this CPU") == 0);
  CHECK(costs.source.find("2 x 16 tokens") != std::string::npos);
}

TEST_CASE("Measured stash and parameter bytes are what the cost model predicts, for every model.recompute") {
  // With full recomputation a block holds less after forward than after backward_input:
  // the larger of the two is what the cost model and the profiler report.
  // A Llama with grouped-query attention, its own SwiGLU width and a short and a long
  // context (its attention half's peak is after forward at T = 96, after backward at 16).
  auto llama = [](GptConfig c) {
    c.arch = ModelArch::llama;
    c.kv_heads = 2;
    c.ffn_dim = 40;
    return c;
  };
  const std::pair<GptConfig, Recompute> cases[] = {
      {GptConfig{2, 32, 4, 16, 300}, Recompute::none},
      {GptConfig{1, 48, 3, 24, 1000}, Recompute::none},
      {GptConfig{2, 32, 4, 16, 300}, Recompute::attention},
      {GptConfig{1, 48, 3, 96, 1000}, Recompute::full},
      {llama(GptConfig{2, 32, 4, 16, 300}), Recompute::none},
      {llama(GptConfig{1, 32, 4, 96, 300}), Recompute::none},
      {llama(GptConfig{1, 32, 4, 96, 300}), Recompute::attention},
      {llama(GptConfig{2, 32, 4, 16, 300}), Recompute::full}};
  for (auto [config, recompute] : cases) {
    config.recompute = recompute;
    CAPTURE(model_arch_name(config.arch));
    CAPTURE(config.d_model);
    CAPTURE(recompute_name(config.recompute));
    ProfileOptions options;
    options.micro_batch_size = 3;
    options.repetitions = 1;
    const ModelCosts measured = profile_layers(config, options);
    REQUIRE(measured.units.size() == 2 * static_cast<std::size_t>(config.layers) + 2);
    const UnitCost want[] = {unit_memory_embedding(config, 3), unit_memory_attention_half(config, 3),
                             unit_memory_mlp_half(config, 3), unit_memory_head(config, 3)};
    const UnitCost got[] = {measured.units.front(), measured.units[1], measured.units[2],
                            measured.units.back()};
    for (int k = 0; k < 4; ++k) {
      CAPTURE(k);
      CHECK(got[k].activation_bytes == want[k].activation_bytes);
      CHECK(got[k].param_bytes == want[k].param_bytes);
    }
  }
}

TEST_CASE("auto on measured costs moves blocks off the last stage of a large-vocabulary model") {
  // The LM head over 32768 tokens dwarfs a block of width 16.
  const GptConfig config{8, 16, 2, 16, 32768};
  ProfileOptions options;
  options.micro_batch_size = 2;
  const ModelCosts costs = profile_layers(config, options);
  REQUIRE(costs.units.back().total_us() > 4 * (costs.units[1].total_us() + costs.units[2].total_us()));
  const PartitionResult r = auto_partition({{"1f1b", 4, 8, 1}, costs, std::nullopt, 0.0});
  CHECK(r.halves_per_stage.back() < r.uniform.halves_per_stage.back());
  CHECK(r.chosen.step_us() < r.uniform.step_us());
  CHECK(r.explanation.find("measured on this CPU") != std::string::npos);
}

TEST_CASE("The profiler rejects what GptStage rejects, as an InputError") {
  CHECK_THROWS_AS(profile_layers(GptConfig{2, 30, 4, 16, 300}), conveyor::InputError);  // 4 heads ∤ 30
  ProfileOptions none;
  none.repetitions = 0;
  CHECK_THROWS_AS(profile_layers(GptConfig{2, 32, 4, 16, 300}, none), conveyor::InputError);
}
