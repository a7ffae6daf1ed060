// Issue 44 item 7, the standby without the store mirror: with buddy copies, node 1 (the
// lowest node other than node 0) keeps copies of node 0's stages' snapshots, as node 0
// keeps every other node's (actors/cluster/standby_role.hpp). 3 processes of one CPU stage
// each, no fault: node 1 says, as the run ends, that it holds copies of node 0's stage up
// to the last step, node 2 stands by for no one, and the weights are the one-process
// run's bit for bit (the copies change nothing of the training).
#include <doctest/doctest.h>

#include <string>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

constexpr int kSteps = 24;

}  // namespace

TEST_CASE("3 one-stage nodes without a fault: node 1 stands by with copies of node 0's stage up to the last step, and the weights are the one-process run's") {
  TempDir dir;
  const auto job = three_stage_job(kSteps);
  const std::string want = one_process_weights(dir, job);
  const auto results = run_nodes(dir, job_on_nodes(3, job, dir / "run", "standby-test"), 150);
  require_all_ok(results);
  INFO("node 1:\n" << results[1].err);
  // fault.snapshot_every is 1: the last snapshot follows the last step.
  CHECK(results[1].err.find("conveyor train: node 1 stands by for node 0: copies of stage(s) [0] up to step " +
                            std::to_string(kSteps) + " (") != std::string::npos);
  for (int n : {0, 2}) CHECK(results[n].err.find("stands by") == std::string::npos);
  check_final_weights(want, dir.path() / "run", 0);
}

TEST_CASE("without buddy copies no node stands by") {
  TempDir dir;
  const auto job = three_stage_job(6, {"--set", "fault.buddy_copies=off"});
  const auto results = run_nodes(dir, job_on_nodes(3, job, dir / "run", "no-standby-test"), 120);
  require_all_ok(results);
  for (const auto& r : results) CHECK(r.err.find("stands by") == std::string::npos);
}
