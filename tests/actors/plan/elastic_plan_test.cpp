// The job's plan on an elastic layout (actors/plan/elastic_plan.hpp): the configured layout
// read back from a started plan, the nodes left after a loss, and the plan of the layout
// replan() chose, which keeps the data, the model and the optimizer of the started one.
#include <doctest/doctest.h>

#include "actors/plan/elastic_plan.hpp"
#include "actors/plan/pipeline_layout.hpp"

using namespace conveyor;

namespace {

// P stages × R replicas of 1f1b over 6 blocks, M micro-batches, cut as `halves`.
JobPlan started(const std::vector<int>& halves, int replicas = 1, int micro_batches = 4,
                const std::string& partition = "uniform") {
  JobPlan plan;
  plan.model.layers = 6;
  plan.data.micro_batches = micro_batches;
  plan.data.seed = 77;
  plan.steps = 12;
  plan.replicas = replicas;
  plan.partition = partition;
  const sched::ScheduleSpec spec{"1f1b", static_cast<int>(halves.size()), micro_batches / replicas, 1};
  auto layout = make_pipeline_layout(spec, 6, halves);
  plan.schedule = layout.schedule;
  plan.placement = layout.placement;
  return plan;
}

}  // namespace

TEST_CASE("the configured layout of a started plan is its stages, replicas, micro-batches and cut") {
  const auto c = configured_layout(started({4, 4, 4}, 1, 4, "explicit"));
  CHECK(c.schedule == "1f1b");
  CHECK(c.stages == 3);
  CHECK(c.replicas == 1);
  CHECK(c.micro_batches == 4);
  CHECK(c.layers == 6);
  CHECK(c.partition == PartitionMode::explicit_list);
  CHECK(c.start_halves == std::vector<int>{4, 4, 4});
  CHECK_THROWS_AS(configured_layout(started({4, 4, 4}, 1, 4, "evenly")), std::invalid_argument);
}

TEST_CASE("the nodes left after a loss are the others, each with its actors' devices") {
  const auto plan = started({4, 4, 4});
  const auto nodes = live_nodes(plan, {0, 1, 2}, {2});
  REQUIRE(nodes.size() == 2);
  CHECK(nodes[0].node == 0);
  CHECK(nodes[0].devices.size() == 1);
  CHECK(nodes[1].node == 1);
  CHECK(nodes[1].devices.size() == 1);
}

TEST_CASE("3 one-stage nodes, node 2 lost: a 2-stage plan on nodes 0 and 1 with the started data and steps") {
  const auto plan = started({4, 4, 4});
  const Replan r = replan(configured_layout(plan), live_nodes(plan, {0, 1, 2}, {2}), ShrinkPolicy::automatic);
  REQUIRE(r.ok());
  const JobPlan shrunk = plan_for_layout(plan, *r.layout);
  CHECK(shrunk.placement.ranks.size() == 2);
  CHECK(shrunk.schedule.spec.stages == 2);
  CHECK(shrunk.stage_actors() == 2);
  CHECK(shrunk.data.micro_batches == 4);  // the global batch stays
  CHECK(shrunk.data.seed == 77);
  CHECK(shrunk.steps == 12);
  CHECK(shrunk.partition == "uniform");
  CHECK(node_of_rank(*r.layout) == std::vector<int>{0, 1});
  const auto from = summarize(plan, {0, 1, 2});
  const auto to = summarize(shrunk, node_of_rank(*r.layout));
  CHECK(from.stages == 3);
  CHECK(from.nodes == std::vector<int>{0, 1, 2});
  CHECK(from.halves_per_model_stage == std::vector<int>{4, 4, 4});
  CHECK(to.stages == 2);
  CHECK(to.nodes == std::vector<int>{0, 1});
  CHECK(to.halves_per_model_stage == std::vector<int>{6, 6});
  // Growing back with every node present gives the started plan's layout again.
  const Replan back = replan(configured_layout(plan), live_nodes(plan, {0, 1, 2}, {}), ShrinkPolicy::automatic);
  REQUIRE(back.ok());
  CHECK(summarize(plan_for_layout(plan, *back.layout), node_of_rank(*back.layout)).halves_per_model_stage ==
        std::vector<int>{4, 4, 4});
}

TEST_CASE("2 replicas × 2 stages, one node lost: one replica of 2 stages takes every micro-batch") {
  const auto plan = started({6, 6}, 2, 4);
  const Replan r = replan(configured_layout(plan), live_nodes(plan, {0, 1, 2, 3}, {3}), ShrinkPolicy::automatic);
  REQUIRE(r.ok());
  const JobPlan shrunk = plan_for_layout(plan, *r.layout);
  CHECK(shrunk.replicas == 1);
  CHECK(shrunk.replica_micro_batches() == 4);
  CHECK(shrunk.actor_devices.empty());
  CHECK(shrunk.schedule.spec.micro_batches == 4);
}

TEST_CASE("the replica left after a shrink from 2 computes both replicas' gradient shares, and a grow back to 2 none") {
  const auto plan = started({6, 6}, 2, 4);
  CHECK(plan.gradient_shares(1) == 1);
  CHECK(plan.actor_data(2).gradient_shares == 1);
  const std::vector<int> started_nodes{0, 1, 2, 3};
  const ElasticChoice shrunk = choose_layout(plan, started_nodes, {0, 1, 2});
  REQUIRE(shrunk.plan);
  CHECK(shrunk.plan->replicas == 1);
  CHECK(shrunk.plan->configured_replicas == 2);
  CHECK(shrunk.plan->gradient_shares(0) == 2);
  for (int actor = 0; actor < 2; ++actor) {
    const StageData d = shrunk.plan->actor_data(actor);
    CHECK(d.gradient_shares == 2);
    CHECK(d.micro_batches == 4);  // both shares of 2
    CHECK(d.first_micro_batch == 0);
  }
  const ElasticChoice grown = choose_layout(plan, started_nodes, {0, 1, 2, 3});
  REQUIRE(grown.plan);
  CHECK(grown.plan->replicas == 2);
  CHECK(grown.plan->gradient_shares(1) == 1);
  CHECK(grown.plan->actor_data(3).gradient_shares == 1);
}

TEST_CASE("after a shrink, node 2 joining again gives every node the started layout back, by choose_layout alone") {
  const auto plan = started({4, 4, 4});
  const std::vector<int> started_nodes{0, 1, 2};
  const ElasticChoice shrunk = choose_layout(plan, started_nodes, {0, 1});
  REQUIRE(shrunk.plan);
  CHECK(shrunk.node_of_rank == std::vector<int>{0, 1});
  // The grow: the nodes present and the one that joined. Computed from the started plan,
  // never from the shrunk one, so every node finds the same layout on its own.
  const ElasticChoice grown = choose_layout(plan, started_nodes, {0, 1, 2});
  REQUIRE(grown.plan);
  CHECK(grown.node_of_rank == started_nodes);
  CHECK(grown.plan->stage_actors() == 3);
  CHECK(grown.plan->placement.ranks.size() == plan.placement.ranks.size());
  CHECK(summarize(*grown.plan, grown.node_of_rank).halves_per_model_stage == std::vector<int>{4, 4, 4});
  CHECK(grown.plan->schedule.ranks == plan.schedule.ranks);
  CHECK(grown.plan->data.micro_batches == plan.data.micro_batches);
  CHECK(grown.plan->data.seed == plan.data.seed);
}

TEST_CASE("2 replicas left of 3 compute 2 and 1 configured replicas' shares, each on a schedule of its own micro-batches") {
  const auto plan = started({6, 6}, 3, 6);
  const std::vector<int> started_nodes{0, 1, 2, 3, 4, 5};
  const ElasticChoice shrunk = choose_layout(plan, started_nodes, {0, 1, 2, 3});
  REQUIRE(shrunk.plan);
  const JobPlan& p = *shrunk.plan;
  CHECK(p.replicas == 2);
  CHECK(p.configured_replicas == 3);
  CHECK(p.gradient_shares(0) == 2);
  CHECK(p.gradient_shares(1) == 1);
  CHECK(p.replica_share(0) == MicroBatchShare{0, 4});
  CHECK(p.replica_share(1) == MicroBatchShare{4, 2});
  REQUIRE(p.replica_schedules.size() == 2);
  CHECK(p.schedule_of(0).spec.micro_batches == 4);
  CHECK(p.schedule_of(1).spec.micro_batches == 2);
  const StageData d = p.actor_data(3);  // replica 1, stage 1
  CHECK(d.micro_batches == 2);
  CHECK(d.first_micro_batch == 4);
  CHECK(d.gradient_shares == 1);
  CHECK(d.replica_shares == std::vector<int>{2, 1});
  const LayoutSummary to = summarize(p, shrunk.node_of_rank);
  CHECK(to.gradient_shares == std::vector<int>{2, 1});
  // Back on all the nodes: the configured layout, no shares.
  const ElasticChoice grown = choose_layout(plan, started_nodes, started_nodes);
  REQUIRE(grown.plan);
  CHECK(grown.plan->replicas == 3);
  CHECK_FALSE(grown.plan->stands_for_configured());
  CHECK(grown.plan->replica_schedules.empty());
  CHECK(grown.plan->actor_data(5).replica_shares.empty());
}
