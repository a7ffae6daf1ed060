#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <string>
#include <vector>

#include "actors/plan/pipeline_layout.hpp"
#include "actors/plan/schedule/cost_model.hpp"
#include "actors/plan/schedule/partitioner.hpp"
#include "actors/plan/schedule/stage_costs.hpp"
#include "kernels/common/error.hpp"
#include "test_util.hpp"

using conveyor::GptConfig;
using conveyor::InputError;
using namespace conveyor::sched;

namespace {

// A model whose blocks all cost `block` (F = I = W; half of it in each half block) and whose
// ends cost what is given.
ModelCosts flat_costs(int blocks, double block, double embedding, double head) {
  const auto unit = [](double t) {
    UnitCost u;
    u.f_us = u.i_us = u.w_us = t;
    return u;
  };
  ModelCosts c;
  c.units.push_back(unit(embedding));
  for (int h = 0; h < 2 * blocks; ++h) c.units.push_back(unit(block / 2));
  c.units.push_back(unit(head));
  c.source = "given by the test";
  return c;
}

// GPT with a 32768-token vocabulary and a narrow residual stream: the LM head dominates.
ModelCosts large_vocab_costs() {
  const GptConfig config{8, 64, 4, 64, 32768};
  return model_costs(config, 4, assumed_throughput("cpu"));
}

std::string input_error(const auto& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

}  // namespace

TEST_CASE("simulate_stages charges each chunk the durations of its own model stage") {
  // interleaved p=2 v=2: rank 0 holds model stages 0 and 2, rank 1 stages 1 and 3.
  const Schedule s = make_schedule({"interleaved-1f1b", 2, 4, 2});
  const SimResult r = simulate_stages(s, StageCosts::from_fiw({1, 2, 3, 4}, {1, 2, 3, 4}, {0, 0, 0, 0}));
  REQUIRE(r.ok());
  CHECK(r.busy[0] == doctest::Approx(4 * (1 + 3) * 2.0));  // 4 micro-batches × (F + B) of stages 0, 2
  CHECK(r.busy[1] == doctest::Approx(4 * (2 + 4) * 2.0));
  CHECK(input_error([&] { simulate_stages(s, StageCosts::from_fiw({1, 1}, {1, 1}, {1, 1})); })
            .find("one per model stage (4)") != std::string::npos);
}

TEST_CASE("uniform_partition gives whole blocks, the earlier model stages taking the remainder") {
  CHECK(uniform_partition(7, 3) == std::vector<int>{6, 4, 4});
  CHECK(uniform_partition(8, 4) == std::vector<int>{4, 4, 4, 4});
  CHECK(uniform_partition(5, 5) == std::vector<int>{2, 2, 2, 2, 2});
  for (int layers = 1; layers <= 20; ++layers) {
    for (int stages = 1; stages <= layers; ++stages) {
      const std::vector<int> halves = uniform_partition(layers, stages);
      REQUIRE(halves.size() == static_cast<std::size_t>(stages));
      CHECK(std::accumulate(halves.begin(), halves.end(), 0) == 2 * layers);
      CHECK(std::is_sorted(halves.rbegin(), halves.rend()));  // non-increasing
      CHECK(halves.front() - halves.back() <= 2);
      for (int h : halves) CHECK(h % 2 == 0);
    }
  }
  CHECK(input_error([] { uniform_partition(3, 4); }).find("3 blocks cannot fill 4 model stages") !=
        std::string::npos);
  CHECK(input_error([] { uniform_partition(3, 0); }).find("uniform partition") == 0);
}

TEST_CASE("check_partition names pipeline.partition for a wrong length, a wrong sum and a zero") {
  CHECK_NOTHROW(check_partition({6, 6, 4}, 8, 3));
  CHECK_NOTHROW(check_partition({7, 5, 4}, 8, 3));  // 3.5, 2.5, 2 blocks
  const std::string length = input_error([] { check_partition({8, 8}, 8, 4); });
  CHECK(length.find("pipeline.partition: [4, 4] has 2 entries") == 0);
  CHECK(length.find("4 model stages") != std::string::npos);
  const std::string sum = input_error([] { check_partition({6, 7, 6}, 8, 3); });
  CHECK(sum.find("pipeline.partition: [3, 3.5, 3]") == 0);
  CHECK(sum.find("sums to 9.5 blocks") != std::string::npos);
  const std::string zero = input_error([] { check_partition({8, 0, 8}, 8, 3); });
  CHECK(zero.find("pipeline.partition") == 0);
  CHECK(zero.find("at least half a block") != std::string::npos);
  CHECK(format_partition({12, 13, -1}) == "[6, 6.5, -0.5]");
}

TEST_CASE("An explicit partition is placed as given") {
  const auto layout = conveyor::make_pipeline_layout({"1f1b", 4, 8, 1}, 8, halves_of_blocks({3, 2, 2, 1}));
  const std::vector<int> first{0, 3, 5, 7}, count{3, 2, 2, 1};
  for (int s = 0; s < 4; ++s) {
    CHECK(layout.placement.chunk_of(s).slice.first_block == first[s]);
    CHECK(layout.placement.chunk_of(s).slice.num_blocks == count[s]);
  }
  CHECK(layout.placement.chunk_of(0).slice.has_embedding);
  CHECK(layout.placement.chunk_of(3).slice.has_head);
  // zbv: model stage 7 (the head) sits on rank 0, chunk 1.
  const auto v =
      conveyor::make_pipeline_layout({"zbv", 4, 8, 1}, 16, halves_of_blocks({3, 2, 2, 2, 2, 2, 2, 1}));
  CHECK(v.placement.ranks[0].chunks[1].slice.has_head);
  CHECK(v.placement.ranks[0].chunks[1].slice.num_blocks == 1);
  CHECK(input_error([] { conveyor::make_pipeline_layout({"1f1b", 4, 8, 1}, 8, {6, 6, 4}); })
            .find("pipeline.partition") == 0);
}

TEST_CASE("A partition in half blocks cuts between a block's attention and MLP halves") {
  // 3.5, 1.5, 2, 1 blocks: model stage 0 ends after block 3's attention half, stage 1 starts
  // at its MLP half.
  const auto layout = conveyor::make_pipeline_layout({"1f1b", 4, 8, 1}, 8, {7, 3, 4, 2});
  using conveyor::StageSlice;
  StageSlice first = StageSlice::of_halves(0, 7, true, false), second = StageSlice::of_halves(7, 3, false, false);
  CHECK(layout.placement.chunk_of(0).slice == first);
  CHECK(layout.placement.chunk_of(1).slice == second);
  CHECK(first.num_blocks == 4);
  CHECK(first.ends_after_attention);
  CHECK_FALSE(first.starts_at_mlp);
  CHECK(second.first_block == 3);
  CHECK(second.num_blocks == 2);
  CHECK(second.starts_at_mlp);
  CHECK_FALSE(second.ends_after_attention);
  CHECK(second.holds_mlp(3));
  CHECK_FALSE(second.holds_attention(3));
  CHECK(second.holds_attention(4));
  CHECK(layout.placement.chunk_of(2).slice == StageSlice::of_halves(10, 4, false, false));
  CHECK(conveyor::slice_layer_names(first) ==
        std::vector<std::string>{"embedding", "block 0", "block 1", "block 2", "block 3 attention"});
  CHECK(conveyor::slice_layer_names(second) == std::vector<std::string>{"block 3 mlp", "block 4"});
}

TEST_CASE("auto cuts mid-block when whole blocks cannot balance the head") {
  // Two ranks, a head as costly as one block: whole blocks give 4 + head against 4 (or 3 +
  // head against 5); half blocks give 3.5 + head against 4.5 — the head's stage holds 3.5.
  const PartitionResult r = auto_partition({{"1f1b", 2, 8, 1}, flat_costs(8, 1.0, 0.0, 1.0), std::nullopt, 0.0});
  CHECK(r.halves_per_stage == std::vector<int>{9, 7});
  CHECK(r.chosen.step_us() < r.uniform.step_us() * (1 - 1e-6));
  CHECK(r.explanation.find("auto partition [4.5, 3.5] blocks per model stage") == 0);
}

TEST_CASE("auto moves blocks off the last stage for a large vocabulary and shortens the step") {
  const ModelCosts costs = large_vocab_costs();
  REQUIRE(costs.units.back().total_us() > 2 * costs.units[1].total_us());  // the head is heavy
  for (const char* name : {"1f1b", "gpipe", "zb-h1"}) {
    CAPTURE(name);
    const PartitionResult r = auto_partition({{name, 4, 8, 1}, costs, std::nullopt, 0.0});
    CHECK(r.uniform.halves_per_stage == std::vector<int>{4, 4, 4, 4});
    CHECK(r.halves_per_stage.back() < r.uniform.halves_per_stage.back());
    CHECK(std::accumulate(r.halves_per_stage.begin(), r.halves_per_stage.end(), 0) == 16);
    CHECK(r.chosen.step_us() < r.uniform.step_us() * (1 - 1e-6));
    CHECK(r.explanation.find("auto partition " + format_partition(r.halves_per_stage)) == 0);
    CHECK(r.explanation.find("uniform [2, 2, 2, 2]") != std::string::npos);
    CHECK(r.explanation.find("cost model") != std::string::npos);
  }
}

TEST_CASE("auto with several chunks per rank is never slower than uniform and lightens the head's chunk") {
  const GptConfig config{16, 64, 4, 64, 32768};
  const ModelCosts costs = model_costs(config, 4, assumed_throughput("cpu"));
  for (const ScheduleSpec& spec : {ScheduleSpec{"interleaved-1f1b", 4, 8, 2}, ScheduleSpec{"zbv", 4, 8, 1}}) {
    CAPTURE(spec.name);
    const PartitionResult r = auto_partition({spec, costs, std::nullopt, 0.0});
    CHECK(r.chosen.step_us() < r.uniform.step_us());
    CHECK(r.halves_per_stage.back() < r.uniform.halves_per_stage.back());
  }
}

TEST_CASE("auto keeps the uniform split when it is already balanced") {
  const PartitionResult r = auto_partition({{"1f1b", 4, 8, 1}, flat_costs(8, 1.0, 0.0, 0.0), std::nullopt, 0.0});
  CHECK(r.halves_per_stage == std::vector<int>{4, 4, 4, 4});
  CHECK(r.chosen.step_us() == doctest::Approx(r.uniform.step_us()));
  CHECK(r.explanation.find("Uniform is already the best found") != std::string::npos);
}

TEST_CASE("auto balances the embedding and the head against the blocks") {
  // The head costs 3 blocks, the embedding 1: the head's stage is the bottleneck with a
  // single half block (3.5 block units), the other 7.5 blocks and the embedding share 3
  // stages.
  const PartitionResult r = auto_partition({{"1f1b", 4, 16, 1}, flat_costs(8, 1.0, 1.0, 3.0), std::nullopt, 0.0});
  CHECK(r.halves_per_stage.back() == 1);  // the minimum: every model stage holds a half
  CHECK(r.halves_per_stage.front() <= 5);
  for (std::size_t s = 0; s + 1 < r.halves_per_stage.size(); ++s) CHECK(r.halves_per_stage[s] <= 7);
  CHECK(r.chosen.step_us() < r.uniform.step_us());
}

TEST_CASE("A memory limit steers the partition, and an infeasible one is an InputError") {
  // Every half block holds 5 bytes of parameters; the unbounded optimum loads the first
  // stages with more halves than the head's (the head is heavy and the embedding free).
  ModelCosts costs = flat_costs(8, 1.0, 0.0, 4.0);
  for (auto& u : costs.units) u.param_bytes = 5.0;
  costs.units.front().param_bytes = 0.0;
  costs.units.back().param_bytes = 0.0;
  const PartitionResult free = auto_partition({{"1f1b", 4, 8, 1}, costs, std::nullopt, 0.0});
  const int most = *std::max_element(free.halves_per_stage.begin(), free.halves_per_stage.end());
  REQUIRE(most >= 5);
  const PartitionResult bounded = auto_partition({{"1f1b", 4, 8, 1}, costs, 5.0 * (most - 1), 0.0});
  for (double m : bounded.chosen.rank_memory_bytes) CHECK(m <= 5.0 * (most - 1));
  CHECK(bounded.explanation.find("limit") != std::string::npos);
  // 16 halves of 5 bytes over 4 ranks need at least 20 bytes on one rank.
  const std::string msg = input_error([&] { auto_partition({{"1f1b", 4, 8, 1}, costs, 15.0, 0.0}); });
  CHECK(msg.find("memory limit") != std::string::npos);
  CHECK(msg.find("20 B") != std::string::npos);
}

TEST_CASE("Activations in flight count against the memory limit") {
  // 1F1B p=2 m=4: rank 0 holds 2 micro-batches at once, rank 1 one. 50 bytes per half.
  ModelCosts costs = flat_costs(4, 1.0, 0.0, 0.0);
  for (auto& u : costs.units) u.activation_bytes = 50.0;
  costs.units.front().activation_bytes = 0.0;
  costs.units.back().activation_bytes = 0.0;
  const Schedule s = make_schedule({"1f1b", 2, 4, 1});
  const PartitionEval e = evaluate_partition(s, costs, {4, 4});
  CHECK(e.rank_memory_bytes == std::vector<double>{400.0, 200.0});
  // Rank 0 may hold 3 halves (2 × 150 bytes), the closest to even that fits.
  const PartitionResult r = auto_partition({{"1f1b", 2, 4, 1}, costs, 300.0, 0.0});
  CHECK(r.halves_per_stage == std::vector<int>{3, 5});
  CHECK_FALSE(r.uniform_fits);
}

TEST_CASE("auto partitions 128 blocks over 16 model stages in well under a second") {
  const ModelCosts costs = flat_costs(128, 1.0, 0.5, 9.0);
  for (const ScheduleSpec& spec : {ScheduleSpec{"1f1b", 16, 32, 1}, ScheduleSpec{"zb-h1", 16, 32, 1},
                                   ScheduleSpec{"zbv", 8, 16, 1}}) {
    CAPTURE(spec.name);
    const auto start = std::chrono::steady_clock::now();
    const PartitionResult r = auto_partition({spec, costs, std::nullopt, 0.0});
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(seconds < 1.0);
    CHECK(r.chosen.step_us() <= r.uniform.step_us());
    CHECK(r.halves_per_stage.back() < r.uniform.halves_per_stage.back());
  }
}
