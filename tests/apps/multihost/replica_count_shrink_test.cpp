// Issue 44, replicas: the counts the shrink and the grow refuse by name. A layout of several
// replicas needs their stage groups (Gloo, actors/job/replica_groups.hpp), which are built
// for the configured count only, and the replicas' shares exchanged to be added in the
// configured ring's order (actors/worker/gloo_ring_order.hpp); so a shrink goes onto one
// replica only (coordinator_shrink.cpp) and a grow only back to the configured
// count (coordinator_grow.cpp). 3 replicas of one CPU stage over 3 processes, 6
// micro-batches a step (so that 2 replicas divide them and are what the nodes left hold):
// - one node lost for good: 2 replicas would fit on the two left, which the shrink refuses,
//   naming the count, and the job fails with the reason;
// - two nodes lost at once: the job shrinks onto node 0 as one replica of the 3 shares; one
//   of them started again joins, 2 replicas would fit, which the grow refuses, naming the
//   count: the joined process exits with the reason, the job goes on as it was and ends
//   with the weights of the fault-free 3-replica run, bit for bit (the shares added in
//   Gloo's ring order).
#include <doctest/doctest.h>
#include <signal.h>

#include <string>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

constexpr int kSteps = 20;

// Stage 0 slowed (timing only) so that the job still runs when a node is killed, and when
// the restarted one joins.
std::vector<std::string> three_replicas(const std::vector<std::string>& extra) {
  auto args = tiny_job({"--set", "train.steps=" + std::to_string(kSteps), "--set", "rendezvous.timeout_s=20", "--set",
                        "pipeline.stages=1", "--set", "parallel.data=3", "--set", "pipeline.micro_batches=6", "--set",
                        "fault.rejoin_timeout_s=2", "--set", "fault.inject=slow:stage=0:ms=15"});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

}  // namespace

TEST_CASE("3 replicas over 3 nodes, one lost for good: the shrink refuses 2 replicas by name and the job fails with it") {
  const KillStep kill = random_kill_step(3, kSteps - 6);
  const int lost = 1 + static_cast<int>(kill.seed % 2);
  MESSAGE("node " << lost << " is killed for good");
  TempDir dir;
  auto nodes = job_on_nodes(3, three_replicas({}), dir / "run", "replica-shrink-refusal-test");
  nodes[static_cast<std::size_t>(lost)].kill_at_node0_step = kill.step;
  const auto results = run_nodes(dir, nodes, 120);
  INFO("node 0:\n" << results[0].err);
  REQUIRE_FALSE(results[0].timed_out);
  CHECK(results[static_cast<std::size_t>(lost)].exit_code == 128 + SIGKILL);
  CHECK(results[0].exit_code != 0);
  CHECK(results[0].err.find("no replacement of node " + std::to_string(lost) +
                            " joined within fault.rejoin_timeout_s (2 s), and the job cannot go on without it: "
                            "shrinking onto 2 replicas is not supported yet") != std::string::npos);
  CHECK(event_rows(dir.path() / "run", "replan").empty());
}

TEST_CASE("3 replicas shrunk onto one, a lost node started again: the grow refuses 2 replicas by name and the job goes on as one") {
  const KillStep kill = random_kill_step(3, 8);
  TempDir dir;
  auto nodes = job_on_nodes(3, three_replicas({}), dir / "run", "replica-grow-refusal-test");
  nodes[2].kill_at_node0_step = kill.step;
  nodes[1].kill_at_node0_step = kill.step;
  nodes[1].restart_after_kill = true;
  nodes[1].restart_when_node0_says = "lost for good";
  const std::string& want = one_process_weights(dir, three_replicas({}));
  const auto results = run_nodes(dir, nodes, 150);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1, started again:\n" << results[1].err);
  REQUIRE(results[0].exit_code == 0);
  CHECK(results[2].exit_code == 128 + SIGKILL);
  CHECK(results[1].killed_exit_code == 128 + SIGKILL);
  const std::string refused = "the joined node(s) are not taken in: growing back to 2 replicas is not supported yet";
  CHECK(results[0].err.find(refused) != std::string::npos);
  CHECK(results[1].exit_code != 0);
  CHECK(results[1].err.find(refused) != std::string::npos);
  const auto replans = event_rows(dir.path() / "run", "replan");
  REQUIRE(replans.size() == 1);
  CHECK(replans[0]["from"]["replicas"] == 3);
  CHECK(replans[0]["to"]["replicas"] == 1);
  CHECK(event_rows(dir.path() / "run", "joined").empty());
  const auto plan = nlohmann::json::parse(read_text(dir.path() / "run" / "plan.json"));
  CHECK(plan["generation"] == 1);
  CHECK(plan["data_parallel"] == 1);
  CHECK(plan["gradient_shares"] == 3);
  // One replica of the 3 shares adds them in Gloo's ring order (gloo_ring_order.hpp).
  check_final_weights(want, dir.path() / "run", kill.seed);
}
