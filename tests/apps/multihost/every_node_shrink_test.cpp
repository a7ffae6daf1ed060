// Issue 44's shrink with checkpoint.writers every_node: 3 processes of one CPU stage each
// write a checkpoint every 4 steps, each node its own stage's shard, node 0 the manifest
// once all are in (coordinator_shard_writes.cpp). Node 2 is lost for good; the job shrinks
// onto nodes 0 and 1 from the buddy copies. What must hold: the shrunk layout's nodes
// write their new stages' shards and node 0's manifests name the shrunk layout; a
// checkpoint whose shard node 2 was to write when it died never gets a manifest (it went
// down with node 2, which the run does not count as its own failure: exit 0), and the
// next one, in the new layout, does; every folder with a manifest verifies and none is
// left without one; the run ends with the fault-free weights bit for bit, and so does a
// --resume of its newest checkpoint in one process on the configured 3 stages. Also: the
// job growing back when node 2 is started again (its new process writes its shards), and
// the shrink without buddy copies, from the checkpoint every node wrote its part of.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <signal.h>

#include <set>
#include <string>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

constexpr int kSteps = 22;  // checkpoints after steps 4, 8, … 20: the newest leaves steps to resume
constexpr int kEvery = 4;

std::vector<std::string> writers_job(const std::vector<std::string>& extra = {}) {
  auto args = three_stage_job(kSteps, {"--set", "checkpoint.writers=every_node", "--set",
                                       "checkpoint.every=" + std::to_string(kEvery), "--set", "checkpoint.keep=10",
                                       "--set", "fault.rejoin_timeout_s=2"});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// Whether node `node`'s log says it wrote stage `stage`'s shard of step `step`.
bool wrote(const std::string& log, int node, int stage, int step) {
  return log.find(fmt::format("node {} wrote stage {}'s shard of step {} (", node, stage, step)) != std::string::npos;
}

// The steps of the summary row's lost_checkpoints (each lost with node 2).
std::set<int> lost_with_node2(const fs::path& run) {
  const auto rows = read_jsonl(run / "metrics.jsonl");
  REQUIRE_FALSE(rows.empty());
  REQUIRE(rows.back()["event"] == "summary");
  std::set<int> steps;
  for (const auto& lost : rows.back().value("lost_checkpoints", nlohmann::json::array())) {
    CHECK(lost["node"] == 2);
    steps.insert(lost["step"].get<int>());
  }
  return steps;
}

// The checks both cases share, after node 2 was lost for good and the job shrank once:
// which layout each checkpoint holds, who wrote its shards, the weights of the run and of
// a resume from its newest checkpoint. Returns the step the shrunk layout started from.
int check_shrunk_run(const TempDir& dir, const std::vector<NodeResult>& results, const std::string& want,
                     const std::string& restored_from = "buddy copies") {
  const auto run = dir.path() / "run";
  const auto replans = event_rows(run, "replan");
  REQUIRE(replans.size() == 1);
  const auto& r = replans[0];
  CHECK(r["lost_node"] == 2);
  CHECK(r["from"]["stages"] == 3);
  CHECK(r["to"]["stages"] == 2);
  CHECK(r["to"]["nodes"] == nlohmann::json::array({0, 1}));
  CHECK(r["restored_from"] == restored_from);
  const auto recoveries = recovery_rows(run);
  REQUIRE(recoveries.size() == 1);
  const int from = recoveries[0]["restored_step"].get<int>();
  MESSAGE("replan: " << r.dump() << "; the shrunk layout starts from step " << from);

  // Up to step `from` the 3-stage layout's checkpoints, each written whole or lost with
  // node 2; after it, every one in the 2-stage layout, node 1 writing its stage 1's shard.
  const auto lost = lost_with_node2(run);
  const auto checkpoints = verified_checkpoints(run);
  for (int step = kEvery; step <= kSteps; step += kEvery) {
    INFO("checkpoint of step " << step);
    const bool before = step <= from;
    if (before && lost.count(step)) {
      CHECK_FALSE(checkpoints.count(step));  // no manifest: never a --resume candidate
      CHECK(results[0].err.find(fmt::format("the checkpoint of step {} went down with node 2", step)) !=
            std::string::npos);
      continue;
    }
    REQUIRE(checkpoints.count(step));
    const auto& m = checkpoints.at(step);
    const auto& layout = before ? r["from"] : r["to"];
    CHECK(m.stages == layout["stages"].get<int>());
    CHECK(m.shards.size() == static_cast<std::size_t>(m.stages));
    CHECK(m.partition_halves == partition_halves(layout["partition"]));
    CHECK(wrote(results[1].err, 1, 1, step));  // stage 1 runs on node 1 in both layouts
  }
  for (int step : lost) CHECK_MESSAGE(step <= from, "checkpoint " << step << " of the shrunk layout was lost");
  CHECK(checkpoints.size() + lost.size() == static_cast<std::size_t>(kSteps / kEvery));

  CHECK_MESSAGE(read_text(run / "weights.safetensors") == want, "weights differ from the run without the fault");
  const auto newest = run / "checkpoints" / conveyor::checkpoint::step_dir_name(20);
  CHECK_MESSAGE(resumed_in_one_process(dir, three_stage_job(kSteps), newest.string()) == want,
                "the resume from " << newest.string() << " ends with other weights");
  return from;
}

}  // namespace

TEST_CASE("with checkpoint.writers every_node, node 2 killed for good at a random step: the job shrinks onto 2 stages whose nodes write their shards, every checkpoint verifies in the layout it names, and the run and a resume of its newest checkpoint end with the fault-free weights") {
  const KillStep kill = random_kill_step(3, 13);
  TempDir dir;
  const std::string& want = one_process_weights(dir, three_stage_job(kSteps));

  auto nodes = job_on_nodes(3, writers_job(), dir.path() / "run", "every-node-shrink-test");
  nodes[2].kill_at_node0_step = kill.step;
  const auto results = run_nodes(dir, nodes, 150);
  INFO("seed " << kill.seed);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  INFO("node 2:\n" << results[2].err);
  CHECK(results[2].exit_code == 128 + SIGKILL);
  REQUIRE(results[0].exit_code == 0);
  REQUIRE(results[1].exit_code == 0);
  CHECK(results[0].err.find("replan: node 2 lost for good") != std::string::npos);
  const int from = check_shrunk_run(dir, results, want);
  // Node 2 wrote its own shard of every checkpoint before it was lost but one it died in.
  const auto lost = lost_with_node2(dir.path() / "run");
  for (int step = kEvery; step <= from; step += kEvery)
    if (!lost.count(step)) CHECK(wrote(results[2].err, 2, 2, step));
}

TEST_CASE("with checkpoint.writers every_node, node 2 lost for good as it writes its shard of step 8: that checkpoint never gets a manifest, the job shrinks, the next checkpoint is the 2-stage layout's, and the weights are the fault-free run's") {
  TempDir dir;
  const std::string& want = one_process_weights(dir, three_stage_job(kSteps));

  auto nodes = job_on_nodes(3, writers_job({"--set", "fault.inject=[exit:node=2:step=8:when=checkpoint]"}),
                            dir.path() / "run", "every-node-shrink-test");
  const auto results = run_nodes(dir, nodes, 150);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  INFO("node 2:\n" << results[2].err);
  CHECK(results[2].err.find("this process dies writing its shard of step 8") != std::string::npos);
  CHECK(results[2].exit_code != 0);
  REQUIRE(results[0].exit_code == 0);
  REQUIRE(results[1].exit_code == 0);
  const int from = check_shrunk_run(dir, results, want);
  // Step 8's snapshots were all in node 0's store (the capture needs every stage's), so
  // the shrunk layout starts there, and step 8 is not checkpointed again.
  CHECK(from >= 8);
  CHECK(lost_with_node2(dir.path() / "run") == std::set<int>{8});
}

TEST_CASE("with checkpoint.writers every_node, node 2 killed for good and started again after the shrink: the job grows back to 3 stages at a checkpoint boundary, the joined node writes its shards again, every checkpoint verifies in its layout, and the weights are the fault-free run's") {
  // Long enough that the shrunk job still runs when node 2's new process joins: stage 0's
  // compute actions sleep a little (fault.inject slow: timing only, the numbers are the same).
  // fault.grow at_checkpoint: the job grows at a checkpoint boundary, whose checkpoint the
  // shrunk layout takes, so at least one checkpoint is the 2-stage layout's (at_step
  // usually grows a step or two after the shrink, before any).
  constexpr int kGrowSteps = 30;  // the newest checkpoint, step 28, leaves steps to resume
  const KillStep kill = random_kill_step(3, 12);
  TempDir dir;
  const auto job = [&](std::vector<std::string> extra) {
    auto args = three_stage_job(kGrowSteps, {"--set", "checkpoint.writers=every_node", "--set",
                                             "checkpoint.every=" + std::to_string(kEvery), "--set",
                                             "checkpoint.keep=20", "--set", "fault.rejoin_timeout_s=2"});
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  const std::string& want = one_process_weights(dir, three_stage_job(kGrowSteps));

  auto nodes = job_on_nodes(3, job({"--set", "fault.inject=slow:stage=0:ms=15", "--set", "fault.grow=at_checkpoint"}),
                            dir.path() / "run",
                            "every-node-grow-test");
  restart_after_shrink(nodes[2], 2, kill.step);
  const auto results = run_nodes(dir, nodes, 150);
  INFO("seed " << kill.seed);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  INFO("node 2, joined:\n" << results[2].err);
  CHECK(results[2].killed_exit_code == 128 + SIGKILL);
  REQUIRE(results[0].exit_code == 0);
  REQUIRE(results[1].exit_code == 0);
  REQUIRE(results[2].exit_code == 0);

  const auto run = dir.path() / "run";
  REQUIRE(event_rows(run, "replan").size() == 1);
  REQUIRE(event_rows(run, "joined").size() == 1);
  const auto recoveries = recovery_rows(run);
  REQUIRE_FALSE(recoveries.empty());
  const int shrunk_from = recoveries[0]["restored_step"].get<int>();
  const int grown_at = boundary_of_event(run, "joined");
  MESSAGE("kill at step " << kill.step << ": the 2-stage layout from step " << shrunk_from << ", 3 stages again from step "
                          << grown_at << ": " << event_rows(run, "joined")[0].dump());
  REQUIRE(grown_at > shrunk_from);
  CHECK(grown_at % kEvery == 0);

  // Before the shrink 3 shards (or lost with node 2); after it up to the grow's boundary 2
  // (that boundary's checkpoint is taken before the grow); after the grow 3 again, node
  // 2's new process writing stage 2's.
  const auto lost = lost_with_node2(run);
  const auto checkpoints = verified_checkpoints(run);
  for (int step = kEvery; step <= kGrowSteps; step += kEvery) {
    INFO("checkpoint of step " << step);
    if (lost.count(step)) {
      CHECK(step <= shrunk_from);
      CHECK_FALSE(checkpoints.count(step));
      continue;
    }
    REQUIRE(checkpoints.count(step));
    const auto& m = checkpoints.at(step);
    CHECK(m.shards.size() == static_cast<std::size_t>(m.stages));
    const bool shrunk = step > shrunk_from && step <= grown_at;
    CHECK(m.stages == (shrunk ? 2 : 3));
    if (shrunk) CHECK(wrote(results[1].err, 1, 1, step));
    if (step > grown_at) CHECK(wrote(results[2].err, 2, 2, step));
  }
  CHECK(checkpoints.size() + lost.size() == static_cast<std::size_t>(kGrowSteps / kEvery));

  check_losses_match(run, dir.path() / "one", kGrowSteps);
  CHECK_MESSAGE(read_text(run / "weights.safetensors") == want, "weights differ from the run without the fault");
  const auto newest = run / "checkpoints" / conveyor::checkpoint::step_dir_name(28);
  CHECK_MESSAGE(resumed_in_one_process(dir, three_stage_job(kGrowSteps), newest.string()) == want,
                "the resume from " << newest.string() << " ends with other weights");
}

TEST_CASE("with checkpoint.writers every_node and no buddy copies, node 2 lost for good: the job shrinks from the checkpoint every node wrote its part of, and later checkpoints are the 2-stage layout's") {
  TempDir dir;
  const std::string& want = one_process_weights(dir, three_stage_job(kSteps));

  // Node 0 holds only markers of the other nodes' snapshots: the shrink goes back to the
  // newest checkpoint, step 8's, read from the folder every node sees (node 2 wrote its
  // shard of it), and redoes steps 8 and 9.
  auto nodes = job_on_nodes(3, writers_job({"--set", "fault.buddy_copies=off", "--set", "fault.inject=[exit:node=2:step=10]"}),
                            dir.path() / "run", "every-node-shrink-test");
  const auto results = run_nodes(dir, nodes, 150);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  INFO("node 2:\n" << results[2].err);
  CHECK(results[2].exit_code != 0);
  REQUIRE(results[0].exit_code == 0);
  REQUIRE(results[1].exit_code == 0);
  CHECK(wrote(results[2].err, 2, 2, 8));
  CHECK(check_shrunk_run(dir, results, want, "checkpoint") == 8);
  CHECK(event_rows(dir.path() / "run", "replan")[0]["steps_redone"] == 2);
  CHECK(lost_with_node2(dir.path() / "run").empty());
}
