// Issue 44, item 2, without buddy copies (fault.buddy_copies off: node 0 keeps only
// markers of the other nodes' snapshots, as with GPU stages): 3 processes of one CPU stage
// each write a checkpoint every 4 steps; node 2's process ends for good at the start of a
// random step K (fault.inject exit, so the seed printed replays the same K) and nobody
// starts it again. At the rejoin deadline the lost node's state after its last checkpoint
// exists nowhere, so nodes 0 and 1 go on with 2 stages from the newest verified checkpoint
// of the run (actors/coordinator/coordinator_shrink.cpp): every stage back to step
// K − K mod 4, cut for the new layout in memory, the steps after it redone. What must
// hold: the replan row says "checkpoint" and K mod 4 steps redone; the checkpoints up to
// that step hold the 3-stage layout, the later ones (written again by the replay) the
// shrunk one; the run ends with the fault-free weights bit for bit. Lost before the first
// checkpoint, there is nothing to go back to: the job fails at the deadline saying so.
// A second node lost before the shrunk layout's first checkpoint: the job shrinks again
// from the same checkpoint of the first layout. (The lost node started again after such
// a shrink is taken back in: no_buddy_grow_test.cpp.)
#include <doctest/doctest.h>
#include <signal.h>

#include <string>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

constexpr int kSteps = 20;
constexpr int kEvery = 4;

// `faults`: fault.inject's list, none when empty.
std::vector<std::string> job(int steps, const std::string& faults) {
  std::vector<std::string> extra{"--set", "fault.buddy_copies=off", "--set", "checkpoint.every=" + std::to_string(kEvery),
                                 "--set", "checkpoint.keep=10", "--set", "fault.rejoin_timeout_s=2"};
  if (!faults.empty()) extra.insert(extra.end(), {"--set", "fault.inject=[" + faults + "]"});
  return three_stage_job(steps, extra);
}

}  // namespace

TEST_CASE("without buddy copies, node 2 lost for good: nodes 0 and 1 go on with 2 stages from the newest checkpoint, redo the steps after it, and end with the fault-free weights bit for bit") {
  // K >= 5: the checkpoint of step 4 exists (the start of step K follows every earlier
  // boundary's checkpoint, whose capture needed node 2's copy of its step).
  const auto kill = random_kill_step(kEvery + 1, kSteps - 3);
  const int k = kill.step;
  const int restored = k - k % kEvery;

  TempDir dir;
  const std::string& want = one_process_weights(dir, three_stage_job(kSteps));
  const auto run = dir.path() / "run";
  auto nodes = job_on_nodes(3, job(kSteps, "exit:node=2:step=" + std::to_string(k)), run, "ckpt-restore-shrink-test");
  const auto start = std::chrono::steady_clock::now();
  const auto results = run_nodes(dir, nodes, 150);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO("seed " << kill.seed << ", node 2 exits at the start of step " << k);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  INFO("node 2:\n" << results[2].err);
  CHECK(results[2].exit_code == 128 + SIGKILL);
  REQUIRE(results[0].exit_code == 0);
  REQUIRE(results[1].exit_code == 0);
  CHECK(results[0].err.find("replan: node 2 lost for good") != std::string::npos);
  CHECK(results[0].err.find("every stage goes back to checkpoint") != std::string::npos);

  const auto replans = event_rows(run, "replan");
  REQUIRE(replans.size() == 1);
  const auto& r = replans[0];
  MESSAGE("replan from a checkpoint, node 2 lost at step " << k << ": " << r.dump() << "; the whole job took " << s
                                                          << " s");
  CHECK(r["lost_node"] == 2);
  CHECK(r["from"]["stages"] == 3);
  CHECK(r["to"]["stages"] == 2);
  CHECK(r["to"]["nodes"] == nlohmann::json::array({0, 1}));
  CHECK(r["restored_from"] == "checkpoint");
  CHECK(r["steps_redone"] == k % kEvery);
  CHECK(r["phases_ms"]["wait"].get<double>() >= 2000.0);

  const auto recoveries = recovery_rows(run);
  REQUIRE(recoveries.size() == 1);
  CHECK(recoveries[0]["fault"] == "node");
  CHECK(recoveries[0]["step"] == k);
  CHECK(recoveries[0]["restored_step"] == restored);
  const auto from = run / "checkpoints" / conveyor::checkpoint::step_dir_name(restored);
  CHECK(recoveries[0]["restored_from"] == "checkpoint " + from.string());

  // Up to the restored step in the 3-stage layout; after it, written by the replay on 2.
  const auto checkpoints = verified_checkpoints(run);
  CHECK(checkpoints.size() == static_cast<std::size_t>(kSteps / kEvery));
  for (const auto& [step, m] : checkpoints) {
    INFO("checkpoint of step " << step);
    CHECK(m.stages == (step <= restored ? 3 : 2));
    CHECK(m.shards.size() == static_cast<std::size_t>(m.stages));
  }

  CHECK(nlohmann::json::parse(read_text(run / "plan.json"))["generation"] == 1);
  CHECK_MESSAGE(read_text(run / "weights.safetensors") == want,
                "weights differ from the run without the fault (seed " << kill.seed << ")");
}

TEST_CASE("without buddy copies, node 2 lost for good before the first checkpoint: the job fails at the rejoin deadline saying there is no checkpoint to go back to") {
  TempDir dir;
  const auto run = dir.path() / "run";
  auto nodes = job_on_nodes(3, job(kSteps, "exit:node=2:step=2"), run, "ckpt-restore-none-test");
  const auto results = run_nodes(dir, nodes, 90);
  INFO("node 0:\n" << results[0].err);
  CHECK(results[0].exit_code == 1);
  CHECK(results[0].err.find("no replacement of node 2 joined within fault.rejoin_timeout_s (2 s), and the job "
                            "cannot go on without it: node 0 keeps no copy of the other nodes' snapshots "
                            "(fault.buddy_copies off), so the nodes present could only go back to a checkpoint "
                            "of this run, and there is none to go back to: ") != std::string::npos);
  CHECK(results[0].err.find("no usable checkpoint") != std::string::npos);
  CHECK(event_rows(run, "replan").empty());
  CHECK_FALSE(fs::exists(run / "weights.safetensors"));
}

TEST_CASE("without buddy copies, nodes 2 then 1 lost for good before the shrunk layout's first checkpoint: node 0 goes on alone from the first layout's checkpoint, bitwise") {
  TempDir dir;
  const std::string& want = one_process_weights(dir, three_stage_job(kSteps));
  const auto run = dir.path() / "run";
  // Node 2 ends as step 6 starts (the job shrinks onto nodes 0 and 1 from checkpoint 4 and
  // replays), node 1 as the replay's step 7 starts: before checkpoint 8, so the newest is
  // still checkpoint 4, written in the 3-stage layout (CheckpointLayouts::any_of_the_run).
  auto nodes = job_on_nodes(3, job(kSteps, "exit:node=2:step=6,exit:node=1:step=7"), run, "ckpt-restore-twice-test");
  const auto results = run_nodes(dir, nodes, 150);
  INFO("node 0:\n" << results[0].err);
  REQUIRE(results[0].exit_code == 0);
  CHECK(results[1].exit_code == 128 + SIGKILL);
  CHECK(results[2].exit_code == 128 + SIGKILL);
  const auto replans = event_rows(run, "replan");
  REQUIRE(replans.size() == 2);
  CHECK(replans[0]["lost_node"] == 2);
  CHECK(replans[0]["to"]["stages"] == 2);
  CHECK(replans[0]["steps_redone"] == 2);
  CHECK(replans[1]["lost_node"] == 1);
  CHECK(replans[1]["to"]["nodes"] == nlohmann::json::array({0}));
  CHECK(replans[1]["to"]["stages"] == 1);
  for (const auto& r : replans) CHECK(r["restored_from"] == "checkpoint");
  CHECK(replans[1]["steps_redone"] == 3);
  const auto checkpoints = verified_checkpoints(run);
  REQUIRE(checkpoints.count(4) == 1);
  CHECK(checkpoints.at(4).stages == 3);
  for (const auto& [step, m] : checkpoints)
    if (step > 4) CHECK(m.stages == 1);
  CHECK(nlohmann::json::parse(read_text(run / "plan.json"))["generation"] == 2);
  CHECK_MESSAGE(read_text(run / "weights.safetensors") == want, "weights differ from the run without the faults");
}
