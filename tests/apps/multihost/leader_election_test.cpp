// Issue 44 item 7, increment 3: node 0 lost, the survivors elect its standby
// (actors/cluster/leader_failover.hpp). 3 processes of one CPU stage each; node 0 dies by
// an injected exit at a random step. Node 1, the standby, promotes its copy of the store
// and says it was elected; node 2 moves its store clients to it and says it reached it.
// Taking over the coordinator is not implemented yet: both end with exit 1 (as a node that
// loses node 0 always did), within a bound. With fault.leader_failover off they end as
// before, with no election.
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

constexpr int kSteps = 24;

std::vector<NodeRun> node0_dies(const TempDir& dir, const std::string& failover,
                                const std::string& token) {
  const auto kill = random_kill_step(3, kSteps - 6);
  MESSAGE("node 0 exits at step " << kill.step);
  return job_on_nodes(
      3,
      three_stage_job(
          kSteps,
          {"--set", "fault.inject=[exit:node=0:step=" + std::to_string(kill.step) + "]", "--set",
           "rendezvous.peer_silence_s=2", "--set", "fault.leader_failover=" + failover}),
      dir / "run", token);
}

}  // namespace

TEST_CASE(
    "node 0 killed: node 1 is elected and promotes its copy of the store, node 2 follows it, and "
    "both end saying so") {
  TempDir dir;
  const auto started = std::chrono::steady_clock::now();
  const auto results = run_nodes(dir, node0_dies(dir, "auto", "election-test"), 120);
  const auto took = std::chrono::steady_clock::now() - started;
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  INFO("node 2:\n" << results[2].err);
  for (const auto& r : results) REQUIRE_FALSE(r.timed_out);
  CHECK(results[0].exit_code != 0);
  CHECK(results[1].exit_code == 1);
  CHECK(results[2].exit_code == 1);
  CHECK(results[1].err.find("node 1 keeps a copy of node 0's store, at") != std::string::npos);
  CHECK(results[1].err.find(
            "node 0 was lost; node 1 was elected to lead (term 1): it promoted its copy of the "
            "store (seq ") != std::string::npos);
  CHECK(results[1].err.find("node(s) [2] follow it") != std::string::npos);
  CHECK(results[1].err.find("and it holds copies of stage(s) [0] up to step ") !=
        std::string::npos);
  CHECK(results[2].err.find(
            "node 0 was lost; node 1 was elected to lead (term 1): this node follows node 1 and "
            "reached its promoted store at ") != std::string::npos);
  // The CAF connection node 2 dialed to node 1 at start outlives node 0: a new leader on
  // node 1 could be reached without dialing.
  CHECK(results[2].err.find(
            "node 1's directory, over the connection node 2 dialed at start, answered (node 1)") !=
        std::string::npos);
  for (int n : {1, 2})
    CHECK(results[n].err.find("taking over the coordinator is not implemented yet: the job ends") !=
          std::string::npos);
  // 24 steps of this job take a few seconds; detection (2 s at most), the grace (2 s) and
  // the election add little more.
  CHECK(took < std::chrono::seconds(60));
}

TEST_CASE(
    "node 0 killed with fault.leader_failover off: the survivors end as before, with no election") {
  TempDir dir;
  const auto results = run_nodes(dir, node0_dies(dir, "off", "no-election-test"), 120);
  INFO("node 1:\n" << results[1].err);
  INFO("node 2:\n" << results[2].err);
  for (int n : {1, 2}) {
    REQUIRE_FALSE(results[n].timed_out);
    CHECK(results[n].exit_code == 1);
    CHECK(results[n].err.find("node 0 ended or became unreachable") != std::string::npos);
    CHECK(results[n].err.find("elected") == std::string::npos);
    CHECK(results[n].err.find("keeps a copy") == std::string::npos);
  }
}
