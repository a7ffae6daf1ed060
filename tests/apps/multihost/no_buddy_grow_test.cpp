// Issue 44's grow without buddy copies (fault.buddy_copies off: node 0 keeps only markers
// of the other nodes' snapshots, as with GPU stages): 3 processes of one CPU stage each
// write a checkpoint every 4 steps; node 2 is killed for good at a random step (the seed
// is printed), the job shrinks onto nodes 0 and 1 from the newest checkpoint (the lost
// node's later state is gone with it: checkpoint_restore_shrink_test.cpp), and node 2,
// started again with the same command, joins. At the next step boundary node 0 asks node
// 1's stage for a copy of its snapshot of that step (CopySnapshot, as a checkpoint's
// capture does: actors/coordinator/snapshot_copies.cpp), cuts the boundary's states for 3
// stages and moves the job onto them (actors/coordinator/coordinator_grow.cpp). What must
// hold: the joined row says the state came from "copies asked of the nodes", nothing is
// redone at the grow, node 0's log says which node was asked and how long the copies
// took; every checkpoint verifies and holds the layout it was taken in (3 stages up to
// the one restored, 2 for those the shrunk job wrote, 3 after the grow); every step's loss
// is the fault-free run's, and so are the final weights, bit for bit. With
// checkpoint.writers every_node and fault.grow at_checkpoint the checkpoint of the grow's
// boundary needed no copy (each node wrote its own shards): the grow asks for them itself.
#include <doctest/doctest.h>
#include <signal.h>

#include <string>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

// Enough steps that the shrunk job still runs when node 2 has joined again: stage 0's
// compute actions sleep a little (fault.inject slow: timing only, the numbers are the same).
constexpr int kSteps = 32;
constexpr int kEvery = 4;

std::vector<std::string> job(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> all{"--set", "fault.buddy_copies=off", "--set", "checkpoint.every=" + std::to_string(kEvery),
                               "--set", "checkpoint.keep=20"};
  all.insert(all.end(), extra.begin(), extra.end());
  return three_stage_job(kSteps, all);
}

// The job without faults in one process, into dir/one: the weights and losses to match.
void run_reference(const TempDir& dir) {
  auto reference = job({"--out", dir / "one"});
  reference.erase(reference.begin());  // train_ok adds "train"
  train_ok(reference, 120);
}

}  // namespace

TEST_CASE("without buddy copies, node 2 killed for good and started again after the shrink from a checkpoint: node 0 asks the nodes for copies of the boundary's snapshots, the job grows back to 3 stages and ends with the fault-free weights bit for bit") {
  // After the checkpoint of step 4 (the shrink goes back to it or a later one).
  const KillStep kill = random_kill_step(kEvery + 2, 14);

  TempDir dir;
  run_reference(dir);
  const auto run = dir.path() / "run";
  auto nodes = job_on_nodes(3, job({"--set", "fault.rejoin_timeout_s=2", "--set", "fault.inject=slow:stage=0:ms=25"}),
                            run, "no-buddy-grow-test");
  restart_after_shrink(nodes[2], 2, kill.step);
  const auto results = run_nodes(dir, nodes, 180);
  INFO("seed " << kill.seed << ", node 2 killed once node 0 reports step " << kill.step);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  INFO("node 2, killed:\n" << results[2].killed_err);
  INFO("node 2, joined:\n" << results[2].err);
  CHECK(results[2].killed_exit_code == 128 + SIGKILL);
  REQUIRE(results[0].exit_code == 0);
  REQUIRE(results[1].exit_code == 0);
  REQUIRE(results[2].exit_code == 0);
  CHECK(results[0].err.find("every stage goes back to checkpoint") != std::string::npos);
  CHECK(results[0].err.find("node 2 joined the shrunk job: it is taken in at the next step boundary "
                            "(fault.grow at_step)") != std::string::npos);
  CHECK(results[0].err.find("node 0 asked node(s) [1] for copies of stage(s) [1]'s snapshots of that step "
                            "(fault.buddy_copies off); they arrived in ") != std::string::npos);
  CHECK(results[0].err.find("joined: node 2 taken in: 1 replica × 2 stages on nodes 0, 1 -> 1 replica × 3 "
                            "stages on nodes 0, 1, 2, restored from copies asked of the nodes, 0 steps redone") !=
        std::string::npos);
  CHECK(results[2].err.find("node 2 moves onto 1 replica × 3 stages (layout generation 2): stage(s) [2] here") !=
        std::string::npos);

  const auto replans = event_rows(run, "replan");
  REQUIRE(replans.size() == 1);
  const auto& r = replans[0];
  CHECK(r["lost_node"] == 2);
  CHECK(r["to"]["stages"] == 2);
  CHECK(r["restored_from"] == "checkpoint");
  const auto joins = event_rows(run, "joined");
  REQUIRE(joins.size() == 1);
  const auto& j = joins[0];
  CHECK(j["node"] == 2);
  CHECK(j["from"]["stages"] == 2);
  CHECK(j["from"]["nodes"] == nlohmann::json::array({0, 1}));
  CHECK(j["to"]["stages"] == 3);
  CHECK(j["to"]["nodes"] == nlohmann::json::array({0, 1, 2}));
  CHECK(j["to"]["partition"] == r["from"]["partition"]);  // the configured cut again
  CHECK(j["restored_from"] == "copies asked of the nodes");
  CHECK(j["steps_redone"] == 0);
  CHECK(j["ms"].get<double>() > 0);
  MESSAGE("kill at step " << kill.step << ": " << r.dump() << "; " << j.dump());

  // The checkpoints: the 3-stage layout's up to the step the shrink went back to, the
  // shrunk job's after it up to the grow's boundary (one there was taken before the grow),
  // the grown layout's after it. Each verifies and its manifest says its layout.
  const auto recoveries = recovery_rows(run);
  REQUIRE_FALSE(recoveries.empty());
  const int restored = recoveries[0]["restored_step"].get<int>();
  const int grown_at = boundary_of_event(run, "joined");
  CHECK(restored % kEvery == 0);
  CHECK(grown_at > restored);
  const auto checkpoints = verified_checkpoints(run);
  CHECK(checkpoints.size() == static_cast<std::size_t>(kSteps / kEvery));
  for (const auto& [step, m] : checkpoints) {
    INFO("checkpoint of step " << step << " (restored " << restored << ", grown after " << grown_at << ")");
    CHECK(m.shards.size() == static_cast<std::size_t>(m.stages));
    const auto& layout = step <= restored ? r["from"] : step <= grown_at ? r["to"] : j["to"];
    CHECK(m.stages == layout["stages"].get<int>());
    CHECK(m.partition_halves == partition_halves(layout["partition"]));
  }

  check_losses_match(run, dir.path() / "one", kSteps);
  CHECK(nlohmann::json::parse(read_text(run / "plan.json"))["generation"] == 2);
  check_final_weights(read_text(dir.path() / "one" / "weights.safetensors"), run, kill.seed);
}

TEST_CASE("without buddy copies, with checkpoint.writers every_node and fault.grow at_checkpoint: node 0 asks for the copies the checkpoint did not need, the job grows back at a checkpoint boundary, and ends with the fault-free weights bit for bit") {
  // Each node writes its own stages' shards, so no checkpoint's capture asked for the
  // copies the grow needs: the grow asks for them itself.
  const KillStep kill = random_kill_step(kEvery + 2, 14);

  TempDir dir;
  run_reference(dir);
  const auto run = dir.path() / "run";
  auto nodes = job_on_nodes(3,
                            job({"--set", "checkpoint.writers=every_node", "--set", "fault.grow=at_checkpoint", "--set",
                                 "fault.rejoin_timeout_s=2", "--set", "fault.inject=slow:stage=0:ms=25"}),
                            run, "no-buddy-grow-every-node-test");
  restart_after_shrink(nodes[2], 2, kill.step);
  const auto results = run_nodes(dir, nodes, 180);
  INFO("seed " << kill.seed << ", node 2 killed once node 0 reports step " << kill.step);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  INFO("node 2, joined:\n" << results[2].err);
  REQUIRE(results[0].exit_code == 0);
  REQUIRE(results[1].exit_code == 0);
  REQUIRE(results[2].exit_code == 0);
  CHECK(results[0].err.find("node 2 joined the shrunk job: it is taken in at the next checkpoint boundary "
                            "(fault.grow at_checkpoint)") != std::string::npos);
  CHECK(results[0].err.find("node 0 asked node(s) [1] for copies of stage(s) [1]'s snapshots of that step") !=
        std::string::npos);

  const auto replans = event_rows(run, "replan");
  REQUIRE(replans.size() == 1);
  CHECK(replans[0]["restored_from"] == "checkpoint");
  const auto joins = event_rows(run, "joined");
  REQUIRE(joins.size() == 1);
  CHECK(joins[0]["to"]["stages"] == 3);
  CHECK(joins[0]["restored_from"] == "copies asked of the nodes");
  CHECK(joins[0]["steps_redone"] == 0);
  const int restored = recovery_rows(run).at(0)["restored_step"].get<int>();
  const int grown_at = boundary_of_event(run, "joined");
  MESSAGE("kill at step " << kill.step << ": restored step " << restored << ", grown after step " << grown_at << ": "
                          << joins[0].dump());
  CHECK(grown_at % kEvery == 0);
  CHECK(grown_at > restored);
  // Every checkpoint whole, written by the nodes of the layout it names.
  const auto checkpoints = verified_checkpoints(run);
  CHECK(checkpoints.size() == static_cast<std::size_t>(kSteps / kEvery));
  for (const auto& [step, m] : checkpoints) {
    INFO("checkpoint of step " << step << " (restored " << restored << ", grown after " << grown_at << ")");
    CHECK(m.shards.size() == static_cast<std::size_t>(m.stages));
    CHECK(m.stages == (step <= restored ? 3 : step <= grown_at ? 2 : 3));
  }
  check_losses_match(run, dir.path() / "one", kSteps);
  check_final_weights(read_text(dir.path() / "one" / "weights.safetensors"), run, kill.seed);
}
