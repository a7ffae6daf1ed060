// Issue 44, replicas: a shrink onto several replicas and a grow onto a count between one
// and the configured. The R' running replicas stand for the R configured ones, each
// computing whole configured replicas' shares (JobPlan::configured_replicas, some one more
// than others), gather every share over their stage group, rebuilt with R' ranks for the
// new layout (ReplicaGroups::join's size), and add the R shares in Gloo's ring order of R
// (actors/worker/share_gradients.hpp), so the run ends with the fault-free R-replica
// weights bit for bit. 3 replicas of one CPU stage over 3 processes, 6 micro-batches a
// step (2 a configured replica):
// - one node, 1 or 2, lost for good at a random step: the job goes on as 2 replicas on
//   the nodes left, the first computing 2 configured replicas' shares (4 micro-batches),
//   the second 1 (2);
// - nodes 1 and 2 lost at once: the job shrinks onto node 0 as one replica of the 3
//   shares; node 1 started again joins and the job grows to 2 replicas (shares 2 and 1).
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

TEST_CASE("3 replicas over 3 nodes, one lost for good: the job goes on as 2 replicas of shares 2 and 1, bitwise the 3-replica run") {
  const KillStep kill = random_kill_step(3, kSteps - 6);
  const int lost = 1 + static_cast<int>(kill.seed % 2);
  MESSAGE("node " << lost << " is killed for good");
  TempDir dir;
  auto nodes = job_on_nodes(3, three_replicas({}), dir / "run", "replica-count-shrink-test");
  nodes[static_cast<std::size_t>(lost)].kill_at_node0_step = kill.step;
  const std::string& want = one_process_weights(dir, three_replicas({}));
  const auto results = run_nodes(dir, nodes, 150);
  INFO("node 0:\n" << results[0].err);
  REQUIRE_FALSE(results[0].timed_out);
  CHECK(results[static_cast<std::size_t>(lost)].exit_code == 128 + SIGKILL);
  REQUIRE(results[0].exit_code == 0);
  const int other = lost == 1 ? 2 : 1;
  CHECK(results[static_cast<std::size_t>(other)].exit_code == 0);
  const auto replans = event_rows(dir.path() / "run", "replan");
  REQUIRE(replans.size() == 1);
  CHECK(replans[0]["lost_node"] == lost);
  CHECK(replans[0]["from"]["replicas"] == 3);
  CHECK(replans[0]["to"]["replicas"] == 2);
  CHECK(replans[0]["to"]["nodes"] == std::vector<int>{0, other});
  CHECK(replans[0]["to"]["gradient_shares"] == std::vector<int>{2, 1});
  const auto plan = nlohmann::json::parse(read_text(dir.path() / "run" / "plan.json"));
  CHECK(plan["generation"] == 1);
  CHECK(plan["data_parallel"] == 2);
  CHECK(plan["configured_replicas"] == 3);
  CHECK(plan["gradient_shares"] == std::vector<int>{2, 1});
  CHECK(plan["replicas"][1]["stages"][0]["first_micro_batch"] == 4);
  CHECK(plan["replicas"][1]["stages"][0]["micro_batches"] == 2);
  check_final_weights(want, dir.path() / "run", kill.seed);
}

TEST_CASE("3 replicas shrunk onto one, a lost node started again: the job grows to 2 replicas of shares 2 and 1, bitwise the 3-replica run") {
  const KillStep kill = random_kill_step(3, 8);
  TempDir dir;
  auto nodes = job_on_nodes(3, three_replicas({}), dir / "run", "replica-count-grow-test");
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
  CHECK(results[1].exit_code == 0);
  const auto replans = event_rows(dir.path() / "run", "replan");
  REQUIRE(replans.size() == 1);
  CHECK(replans[0]["from"]["replicas"] == 3);
  CHECK(replans[0]["to"]["replicas"] == 1);
  CHECK(replans[0]["to"]["gradient_shares"] == std::vector<int>{3});
  const auto joined = event_rows(dir.path() / "run", "joined");
  REQUIRE(joined.size() == 1);
  CHECK(joined[0]["node"] == 1);
  CHECK(joined[0]["to"]["replicas"] == 2);
  CHECK(joined[0]["to"]["gradient_shares"] == std::vector<int>{2, 1});
  const auto plan = nlohmann::json::parse(read_text(dir.path() / "run" / "plan.json"));
  CHECK(plan["generation"] == 2);
  CHECK(plan["data_parallel"] == 2);
  CHECK(plan["gradient_shares"] == std::vector<int>{2, 1});
  check_final_weights(want, dir.path() / "run", kill.seed);
}
