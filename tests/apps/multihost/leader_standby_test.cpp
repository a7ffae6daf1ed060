// Issue 44 item 7, the standby without the store mirror: with buddy copies, node 1 (the
// lowest node other than node 0) keeps copies of node 0's stages' snapshots, as node 0
// keeps every other node's (actors/cluster/standby_role.hpp). 3 processes of one CPU stage
// each, no fault: node 1 says, as the run ends, that it holds copies of node 0's stage up
// to the last step, node 2 stands by for no one, and the weights are the one-process
// run's bit for bit (the copies change nothing of the training). The standby is derived
// again from each layout a re-plan moves onto: node 1 lost for good, node 2 stands by;
// node 1 started again and grown back in, node 1 again.
#include <doctest/doctest.h>

#include <string>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

constexpr int kSteps = 24;

// The line the standby says as the run ends, up to the last step.
std::string stands_by(int node) {
  return "conveyor train: node " + std::to_string(node) + " stands by for node 0: copies of stage(s) [0] up to step " +
         std::to_string(kSteps) + " (";
}

}  // namespace

TEST_CASE("3 one-stage nodes without a fault: node 1 stands by with copies of node 0's stage up to the last step, and the weights are the one-process run's") {
  TempDir dir;
  const auto job = three_stage_job(kSteps);
  const std::string want = one_process_weights(dir, job);
  const auto results = run_nodes(dir, job_on_nodes(3, job, dir / "run", "standby-test"), 150);
  require_all_ok(results);
  INFO("node 1:\n" << results[1].err);
  // fault.snapshot_every is 1: the last snapshot follows the last step.
  CHECK(results[1].err.find(stands_by(1)) != std::string::npos);
  for (int n : {0, 2}) CHECK(results[n].err.find("stands by") == std::string::npos);
  check_final_weights(want, dir.path() / "run", 0);
}

TEST_CASE("node 1 lost for good: after the shrink onto nodes 0 and 2, node 2 stands by") {
  const auto kill = random_kill_step(3, kSteps - 6);
  TempDir dir;
  const auto job = three_stage_job(kSteps);
  const std::string want = one_process_weights(dir, job);
  auto nodes = job_on_nodes(3, three_stage_job(kSteps, {"--set", "fault.rejoin_timeout_s=2"}), dir / "run",
                            "standby-shrink-test");
  nodes[1].kill_at_node0_step = kill.step;
  const auto results = run_nodes(dir, nodes, 150);
  require_survivors_ok(results, 1);
  CHECK_MESSAGE(results[0].err.find("replan: node 1 lost for good") != std::string::npos, results[0].err);
  CHECK_MESSAGE(results[2].err.find(stands_by(2)) != std::string::npos, results[2].err);
  check_final_weights(want, dir.path() / "run", kill.seed);
}

TEST_CASE("node 1 lost and started again after the shrink: grown back in, it stands by again, and node 2 no longer") {
  const auto kill = random_kill_step(3, 10);
  TempDir dir;
  const auto job = three_stage_job(kSteps);
  const std::string want = one_process_weights(dir, job);
  // Slow enough that the restarted node 1 joins before the last step.
  auto nodes = job_on_nodes(
      3, three_stage_job(kSteps, {"--set", "fault.rejoin_timeout_s=2", "--set", "fault.inject=slow:stage=0:ms=15"}),
      dir / "run", "standby-grow-test");
  restart_after_shrink(nodes[1], 1, kill.step);
  const auto results = run_nodes(dir, nodes, 150);
  require_all_ok(results);
  REQUIRE_MESSAGE(event_rows(dir.path() / "run", "joined").size() == 1, results[0].err);
  CHECK_MESSAGE(results[1].err.find(stands_by(1)) != std::string::npos, results[1].err);
  CHECK_MESSAGE(results[2].err.find("stands by") == std::string::npos, results[2].err);
  check_final_weights(want, dir.path() / "run", kill.seed);
}

TEST_CASE("without buddy copies no node stands by") {
  TempDir dir;
  const auto job = three_stage_job(6, {"--set", "fault.buddy_copies=off"});
  const auto results = run_nodes(dir, job_on_nodes(3, job, dir / "run", "no-standby-test"), 120);
  require_all_ok(results);
  for (const auto& r : results) CHECK(r.err.find("stands by") == std::string::npos);
}
