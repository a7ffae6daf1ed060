// The elastic re-planner (actors/plan/replan.hpp): which layout a job runs on with the
// nodes it has, shrinking (fault.shrink) and growing back, and that the step's data does
// not change with it.
#include <doctest/doctest.h>

#include <cstring>
#include <set>

#include "actors/plan/replan.hpp"
#include "actors/plan/schedule/cost_model.hpp"
#include "kernels/data/micro_batch_sampler.hpp"

using namespace conveyor;

namespace {

// pipeline.stages P, parallel.data R, M micro-batches, 4 blocks, uniform.
ConfiguredLayout configured(int stages, int replicas, int micro_batches = 8, int layers = 4) {
  ConfiguredLayout c;
  c.schedule = "1f1b";
  c.stages = stages;
  c.replicas = replicas;
  c.micro_batches = micro_batches;
  c.layers = layers;
  c.start_halves = sched::uniform_partition(layers, stages);
  return c;
}

// Nodes 0 … n−1 (but `missing`), each with `per_node` CPU stage slots.
std::vector<LiveNode> cpu_nodes(int n, std::set<int> missing = {}, int per_node = 1) {
  std::vector<LiveNode> out;
  for (int k = 0; k < n; ++k)
    if (!missing.count(k)) out.push_back({k, std::vector<Device>(static_cast<std::size_t>(per_node), Device::cpu())});
  return out;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("with every configured device present the re-plan is the configured layout") {
  const auto c = configured(2, 2);
  const Replan r = replan(c, cpu_nodes(4), ShrinkPolicy::automatic);
  REQUIRE(r.ok());
  CHECK(r.layout->replicas == 2);
  CHECK(r.layout->stages == 2);
  CHECK(r.layout->halves_per_model_stage == c.start_halves);
  CHECK(r.layout->nodes() == std::vector<int>{0, 1, 2, 3});
  CHECK(r.layout->shares == std::vector<MicroBatchShare>{{0, 4}, {4, 4}});
  CHECK(r.warnings.empty());
  CHECK(has(r.reason, "the configured layout"));
}

TEST_CASE("fault.shrink auto drops a whole replica when parallel.data is 2 and keeps the partition") {
  auto c = configured(2, 2);
  c.partition = PartitionMode::explicit_list;
  c.start_halves = {5, 3};  // 2.5 and 1.5 blocks: kept, since the pipeline keeps its length
  const Replan r = replan(c, cpu_nodes(4, {3}), ShrinkPolicy::automatic);
  REQUIRE(r.ok());
  CHECK(r.layout->replicas == 1);
  CHECK(r.layout->stages == 2);
  CHECK(r.layout->halves_per_model_stage == std::vector<int>{5, 3});
  CHECK(r.layout->partition == PartitionMode::explicit_list);
  // The replica left takes the whole step: the global batch stays.
  CHECK(r.layout->shares == std::vector<MicroBatchShare>{{0, 8}});
  CHECK(r.layout->pipeline.schedule.spec.micro_batches == 8);
  CHECK(r.layout->nodes() == std::vector<int>{0, 1});
  CHECK(r.warnings.empty());
  CHECK(has(r.reason, "1 of 2 replica(s) dropped"));
}

TEST_CASE("fault.shrink stages keeps the replicas and cuts the pipeline shorter") {
  const Replan r = replan(configured(2, 2), cpu_nodes(4, {3}), ShrinkPolicy::stages);
  REQUIRE(r.ok());
  CHECK(r.layout->replicas == 2);
  CHECK(r.layout->stages == 1);
  CHECK(r.layout->halves_per_model_stage == std::vector<int>{8});
  CHECK(r.layout->shares == std::vector<MicroBatchShare>{{0, 4}, {4, 4}});
  CHECK(r.layout->nodes() == std::vector<int>{0, 1});
}

TEST_CASE("fault.shrink auto with no whole replica left keeps one replica of as many stages as fit") {
  // 2 replicas × 3 stages on 6 nodes, 4 lost: 2 devices hold no replica of 3 stages.
  const Replan r = replan(configured(3, 2), cpu_nodes(6, {1, 2, 4, 5}), ShrinkPolicy::automatic);
  REQUIRE(r.ok());
  CHECK(r.layout->replicas == 1);
  CHECK(r.layout->stages == 2);
  CHECK(r.layout->shares == std::vector<MicroBatchShare>{{0, 8}});
  CHECK(r.layout->nodes() == std::vector<int>{0, 3});
  CHECK(has(r.reason, "1 of 2 replica(s) dropped"));
  CHECK(has(r.reason, "the pipeline cut into 2 stages instead of 3"));
}

TEST_CASE("3 nodes of one stage each, node 2 lost: the model is cut uniformly over 2 stages") {
  const Replan r = replan(configured(3, 1, 8, 3), cpu_nodes(3, {2}), ShrinkPolicy::automatic);
  REQUIRE(r.ok());
  CHECK(r.layout->replicas == 1);
  CHECK(r.layout->stages == 2);
  CHECK(r.layout->halves_per_model_stage == sched::uniform_partition(3, 2));
  CHECK(r.layout->pipeline.placement.ranks.size() == 2);
  CHECK(r.layout->pipeline.placement.model_stages() == 2);
  CHECK(r.layout->seats == std::vector<ActorSeat>{{0, Device::cpu()}, {1, Device::cpu()}});
}

TEST_CASE("an explicit partition list becomes uniform with a warning when the stage count changes") {
  auto c = configured(3, 1);
  c.partition = PartitionMode::explicit_list;
  c.start_halves = {2, 2, 4};
  const Replan r = replan(c, cpu_nodes(3, {1}), ShrinkPolicy::automatic);
  REQUIRE(r.ok());
  CHECK(r.layout->stages == 2);
  CHECK(r.layout->partition == PartitionMode::uniform);
  CHECK(r.layout->halves_per_model_stage == std::vector<int>{4, 4});
  REQUIRE(r.warnings.size() == 1);
  CHECK(has(r.warnings[0], "pipeline.partition [1, 1, 2] is written for 3 stages"));
  CHECK(has(r.warnings[0], "2-stage pipeline is cut uniformly"));
}

TEST_CASE("pipeline.partition auto re-runs the partitioner with the start's costs") {
  GptConfig model;
  model.layers = 4;
  model.d_model = 32;
  model.heads = 2;
  model.seq_len = 16;
  model.vocab = 64;
  auto c = configured(3, 1, 6);
  c.partition = PartitionMode::automatic;
  c.costs = sched::model_costs(model, 2, sched::assumed_throughput("cpu"));
  const Replan r = replan(c, cpu_nodes(3, {0}), ShrinkPolicy::automatic);
  REQUIRE(r.ok());
  CHECK(r.layout->stages == 2);
  CHECK(r.layout->partition == PartitionMode::automatic);
  sched::PartitionRequest request;
  request.spec = {"1f1b", 2, 6, 1};
  request.costs = *c.costs;
  CHECK(r.layout->halves_per_model_stage == sched::auto_partition(request).halves_per_stage);
  CHECK(r.warnings.empty());
  CHECK(r.layout->nodes() == std::vector<int>{1, 2});

  c.costs.reset();  // no costs kept: uniform, said
  const Replan u = replan(c, cpu_nodes(3, {0}), ShrinkPolicy::automatic);
  REQUIRE(u.ok());
  CHECK(u.layout->partition == PartitionMode::uniform);
  REQUIRE(u.warnings.size() == 1);
  CHECK(has(u.warnings[0], "pipeline.partition auto"));
}

TEST_CASE("dropping replicas keeps every count, each replica left taking whole configured replicas' micro-batches") {
  // 4 replicas of one stage, M = 4, one node lost: 3 replicas, the first standing for
  // configured replicas 0 and 1 (2 micro-batches), the others for one each, each on a
  // schedule of its own count.
  const Replan r = replan(configured(1, 4, 4), cpu_nodes(4, {1}), ShrinkPolicy::replicas);
  REQUIRE(r.ok());
  CHECK(r.layout->replicas == 3);
  CHECK(r.layout->shares == std::vector<MicroBatchShare>{{0, 2}, {2, 1}, {3, 1}});
  CHECK(r.layout->nodes() == std::vector<int>{0, 2, 3});
  REQUIRE(r.layout->replica_schedules.size() == 3);
  CHECK(r.layout->replica_schedules[0].spec.micro_batches == 2);
  CHECK(r.layout->replica_schedules[2].spec.micro_batches == 1);
  CHECK(has(r.reason, "taking 2, 1, 1 of the step's 4 micro-batches"));
}

TEST_CASE("stage actors fill the nodes present in rank order, on their devices") {
  // 2 replicas × 2 stages on 2 nodes of 2 GPUs each; node 0 lost: replica 0 moves to node 1.
  auto gpus = [](int node) { return LiveNode{node, {Device::cuda(0), Device::cuda(1)}}; };
  const Replan r = replan(configured(2, 2), {gpus(1)}, ShrinkPolicy::automatic);
  REQUIRE(r.ok());
  CHECK(r.layout->seats == std::vector<ActorSeat>{{1, Device::cuda(0)}, {1, Device::cuda(1)}});
  CHECK(r.layout->pipeline.placement.ranks[1].device == Device::cuda(1));
  // Unsorted input: the nodes are taken in rank order all the same.
  const Replan both = replan(configured(2, 2), {gpus(1), gpus(0)}, ShrinkPolicy::automatic);
  REQUIRE(both.ok());
  CHECK(both.layout->seats.front().node == 0);
  CHECK(both.layout->seats.back().node == 1);
}

TEST_CASE("no layout fits: the reason names the devices and the rule that needed more") {
  const Replan replicas = replan(configured(3, 2, 8, 4), cpu_nodes(6, {1, 2, 3, 4, 5}), ShrinkPolicy::replicas);
  CHECK_FALSE(replicas.ok());
  CHECK(has(replicas.reason, "no layout fits 1 device(s) on nodes 0"));
  CHECK(has(replicas.reason, "one replica of 3 stages needs 3"));

  const Replan stages = replan(configured(2, 2), cpu_nodes(4, {1, 2, 3}), ShrinkPolicy::stages);
  CHECK_FALSE(stages.ok());
  CHECK(has(stages.reason, "2 replicas need at least 2"));

  const Replan empty = replan(configured(2, 1), {}, ShrinkPolicy::automatic);
  CHECK_FALSE(empty.ok());
  CHECK(has(empty.reason, "nodes none"));

  // A stage count the schedule refuses is skipped, not taken: interleaved-1f1b needs the
  // micro-batches to be a multiple of the stages, which 2 stages over 3 are not.
  auto c = configured(3, 1, 3, 6);
  c.schedule = "interleaved-1f1b";
  c.virtual_stages = 2;
  c.start_halves = sched::uniform_partition(6, 6);
  const Replan r = replan(c, cpu_nodes(3, {2}), ShrinkPolicy::automatic);
  REQUIRE(r.ok());
  CHECK(r.layout->stages == 1);
}

TEST_CASE("growing back: the configured layout when its nodes return, else the largest that fits") {
  const auto c = configured(2, 2);
  const Replan shrunk = replan(c, cpu_nodes(4, {3}), ShrinkPolicy::automatic);
  REQUIRE(shrunk.ok());
  CHECK(shrunk.layout->replicas == 1);
  const Replan back = replan(c, cpu_nodes(4), ShrinkPolicy::automatic);
  REQUIRE(back.ok());
  CHECK(back.layout->replicas == 2);
  CHECK(back.layout->stages == 2);
  // A new host with more devices than the lost one: never more than configured.
  auto big = cpu_nodes(4, {3});
  big.push_back({7, std::vector<Device>(4, Device::cpu())});
  const Replan capped = replan(c, big, ShrinkPolicy::automatic);
  REQUIRE(capped.ok());
  CHECK(capped.layout->replicas == 2);
  CHECK(capped.layout->stages == 2);
  CHECK(capped.layout->nodes() == std::vector<int>{0, 1, 2, 7});
}

TEST_CASE("fault.grow: at_step takes a node in at any step boundary, at_checkpoint at a checkpoint's, never not") {
  CHECK(grow_now(GrowPolicy::at_step, false));
  CHECK(grow_now(GrowPolicy::at_step, true));
  CHECK_FALSE(grow_now(GrowPolicy::at_checkpoint, false));
  CHECK(grow_now(GrowPolicy::at_checkpoint, true));
  CHECK_FALSE(grow_now(GrowPolicy::never, true));
}

TEST_CASE("a shrunk layout's replicas draw exactly the step's samples of the configured layout") {
  // The sampler keys a micro-batch by (seed, step, global micro-batch): the shares of any
  // replica count are the global indices 0 … M−1, each once, so the tokens of a step, put in
  // global order, are the same bytes before and after the shrink.
  std::vector<TokenId> tokens(4096);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<TokenId>((i * 7919u) % 251u);
  const TokenCorpus corpus = TokenCorpus::from_tokens(tokens);
  const TokenRange range{0, tokens.size()};
  auto step_tokens = [&](const ElasticLayout& layout, std::int64_t step) {
    std::vector<std::int32_t> out(static_cast<std::size_t>(8 * 2 * 16));
    std::set<int> seen;
    for (const auto& share : layout.shares)
      for (int j = 0; j < share.count; ++j) {
        const int global = share.first + j;
        CHECK(seen.insert(global).second);  // no micro-batch twice
        const auto mb = sample_micro_batch(corpus, range, SampleKey{1234, step, global, 0}, 2, 16);
        std::memcpy(out.data() + static_cast<std::size_t>(global) * 32, mb.tokens.raw(), mb.tokens.bytes());
      }
    CHECK(seen.size() == 8);  // none skipped
    return out;
  };
  const auto c = configured(2, 2);
  const Replan full = replan(c, cpu_nodes(4), ShrinkPolicy::automatic);
  const Replan shrunk = replan(c, cpu_nodes(4, {0}), ShrinkPolicy::automatic);
  REQUIRE(full.ok());
  REQUIRE(shrunk.ok());
  REQUIRE(shrunk.layout->replicas == 1);
  for (std::int64_t step : {0, 5, 199}) CHECK(step_tokens(*full.layout, step) == step_tokens(*shrunk.layout, step));
}
