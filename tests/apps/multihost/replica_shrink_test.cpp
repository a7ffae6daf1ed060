// Issue 44's shrink of replicas (actors/coordinator/coordinator_shrink.cpp): 2 replicas ×
// 2 CPU stages over 4 processes, one stage each; a node other than node 0, chosen at
// random, is killed for good at a random step (the seed is printed) and nobody starts it
// again. Once fault.rejoin_timeout_s is over the job goes on as one replica of 2 stages on
// the nodes present, which computes both configured replicas' shares of every step
// (actors/worker/gradient_shares.hpp), and ends with the weights of the fault-free
// 2-replica run, bit for bit. The other cases grow back: the lost node started again after
// the shrink is seated with the survivor the shrink left idle (2 × 2 over 4 processes), or
// as replica 1 (2 replicas of one stage over 2 processes), the stage groups joined anew
// (coordinator_relayout.cpp), still the 2-replica bits.
#include <doctest/doctest.h>
#include <signal.h>

#include <cstdlib>
#include <random>
#include <string>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

constexpr int kSteps = 20;

std::vector<std::string> replica_job(const std::vector<std::string>& extra) {
  auto args = tiny_job({"--set", "train.steps=" + std::to_string(kSteps), "--set", "rendezvous.timeout_s=20",
                        "--set", "pipeline.stages=2", "--set", "parallel.data=2"});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

}  // namespace

TEST_CASE("2 replicas of 2 stages over 4 nodes, one node killed for good: one replica goes on and ends with the 2-replica weights bit for bit") {
  // CONVEYOR_TEST_SEED=<printed seed> replays a run's node and kill step.
  const char* given = std::getenv("CONVEYOR_TEST_SEED");
  const auto seed = given ? static_cast<std::uint32_t>(std::stoul(given)) : std::random_device{}();
  std::mt19937 random(seed);
  const int lost = std::uniform_int_distribution<int>(1, 3)(random);
  const int kill_step = std::uniform_int_distribution<int>(3, kSteps - 6)(random);
  MESSAGE("seed " << seed << ": node " << lost << " is killed once node 0 reports step " << kill_step
                  << " or later");

  TempDir dir;
  auto reference = replica_job({"--out", dir / "two"});
  reference.erase(reference.begin());  // train_ok adds "train"
  train_ok(reference, 120);

  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  std::vector<NodeRun> nodes;
  for (int n = 0; n < 4; ++n) {
    auto args = replica_job({"--set", "fault.rejoin_timeout_s=2"});
    args.insert(args.end(), {"--nnodes", "4", "--node-rank", std::to_string(n), "--rdzv", rdzv, "--out", dir / "run"});
    nodes.push_back(NodeRun{args, {{"CONVEYOR_TOKEN", "replica-shrink-test"}}, {}});
  }
  nodes[static_cast<std::size_t>(lost)].kill_at_node0_step = kill_step;
  const auto start = std::chrono::steady_clock::now();
  const auto results = run_nodes(dir, nodes, 180);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  INFO("node 2:\n" << results[2].err);
  INFO("node 3:\n" << results[3].err);
  for (int n = 0; n < 4; ++n) {
    CAPTURE(n);
    if (n == lost) {
      CHECK(results[static_cast<std::size_t>(n)].exit_code == 128 + SIGKILL);
    } else {
      REQUIRE(results[static_cast<std::size_t>(n)].exit_code == 0);
    }
  }
  CHECK(results[0].err.find("replan: node " + std::to_string(lost) + " lost for good") != std::string::npos);

  std::vector<nlohmann::json> replans;
  for (auto& row : read_jsonl(dir.path() / "run" / "metrics.jsonl"))
    if (row.value("event", "") == "replan") replans.push_back(row);
  REQUIRE(replans.size() == 1);
  const auto& r = replans[0];
  CHECK(r["lost_node"] == lost);
  CHECK(r["from"]["replicas"] == 2);
  CHECK(r["from"]["stages"] == 2);
  CHECK(r["to"]["replicas"] == 1);
  CHECK(r["to"]["stages"] == 2);
  CHECK(r["restored_from"] == "buddy copies");
  MESSAGE("replan after node " << lost << "'s kill at step " << kill_step << ": " << r.dump()
                               << "; the whole job took " << s << " s");

  const auto plan = nlohmann::json::parse(read_text(dir.path() / "run" / "plan.json"));
  CHECK(plan["generation"] == 1);
  CHECK(plan["data_parallel"] == 1);
  CHECK(plan["gradient_shares"] == 2);

  const std::string want = read_text(dir.path() / "two" / "weights.safetensors");
  const std::string got = read_text(dir.path() / "run" / "weights.safetensors");
  REQUIRE(got.size() == want.size());
  CHECK_MESSAGE(got == want, "weights differ from the fault-free 2-replica run (seed " << seed << ")");
}

// The shrunk layout (one replica of 2 stages on two of the three nodes left) keeps the
// third survivor in the job without a stage; when the lost node is started again, the grow
// counts that idle node with it (actors/plan/replan_nodes.hpp): the 4 configured nodes, so
// back to 2 replicas × 2 stages, their stage groups joined anew, still the 2-replica bits.
// The lost node is drawn from the seed, so the idle one is any of the others but node 0.
TEST_CASE("2 replicas of 2 stages over 4 nodes, one killed and started again after the shrink: the grow seats it and the node left idle, back to 2 replicas, bit for bit") {
  const KillStep kill = random_kill_step(3, kSteps - 8);
  const int lost = 1 + static_cast<int>(kill.seed % 3);
  MESSAGE("seed " << kill.seed << ": node " << lost << " is killed and started again after the shrink");
  TempDir dir;
  const std::string& want = one_process_weights(dir, replica_job({}));
  // Stage 0 slowed so that the job still runs when the restarted node joins.
  auto nodes = job_on_nodes(4, replica_job({"--set", "fault.rejoin_timeout_s=2", "--set", "fault.inject=slow:stage=0:ms=15"}),
                            dir / "run", "replica-idle-grow-test");
  restart_after_shrink(nodes[static_cast<std::size_t>(lost)], lost, kill.step);
  const auto results = run_nodes(dir, nodes, 180);
  for (int n = 0; n < 4; ++n) {
    CAPTURE(n);
    INFO("node " << n << ":\n" << results[static_cast<std::size_t>(n)].err);
    REQUIRE(results[static_cast<std::size_t>(n)].exit_code == 0);
  }
  CHECK(results[static_cast<std::size_t>(lost)].killed_exit_code == 128 + SIGKILL);
  INFO("node 0:\n" << results[0].err);
  // The node the shrink left without a stage said so, and the grow seated it again.
  int idle = -1;
  for (int n = 1; n < 4; ++n)
    if (n != lost && results[static_cast<std::size_t>(n)].err.find("moves onto 1 replica × 2 stages (layout generation 1): "
                                                                    "stage(s) [] here") != std::string::npos)
      idle = n;
  REQUIRE(idle > 0);
  CHECK(results[static_cast<std::size_t>(idle)].err.find("moves onto 2 replicas × 2 stages (layout generation 2)") !=
        std::string::npos);
  CHECK(results[0].err.find("joined: node " + std::to_string(lost) + " taken in: 1 replica × 2 stages") !=
        std::string::npos);
  CHECK(results[0].err.find("-> 2 replicas × 2 stages on nodes 0, 1, 2, 3") != std::string::npos);
  const auto replans = event_rows(dir.path() / "run", "replan");
  REQUIRE(replans.size() == 1);
  CHECK(replans[0]["to"]["replicas"] == 1);
  const auto joined = event_rows(dir.path() / "run", "joined");
  REQUIRE(joined.size() == 1);
  CHECK(joined[0]["to"]["replicas"] == 2);
  CHECK(joined[0]["to"]["stages"] == 2);
  MESSAGE("node " << idle << " idle after the shrink: " << replans[0].dump() << "; grow: " << joined[0].dump());
  const auto plan = nlohmann::json::parse(read_text(dir.path() / "run" / "plan.json"));
  CHECK(plan["generation"] == 2);
  CHECK(plan["data_parallel"] == 2);
  CHECK(plan.value("gradient_shares", 1) == 1);

  check_final_weights(want, dir.path() / "run", kill.seed);
}

TEST_CASE("2 replicas of one stage over 2 nodes, node 1 killed and started again after the shrink: the job grows back to 2 replicas and ends with the 2-replica weights bit for bit") {
  const KillStep kill = random_kill_step(3, 10);
  TempDir dir;
  const auto one_stage = [](std::vector<std::string> extra) {
    auto args = replica_job({"--set", "pipeline.stages=1"});
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  const std::string& want = one_process_weights(dir, one_stage({}));
  auto nodes = job_on_nodes(2, one_stage({"--set", "fault.rejoin_timeout_s=2", "--set", "fault.inject=slow:stage=0:ms=15"}),
                            dir / "run", "replica-grow-test");
  restart_after_shrink(nodes[1], 1, kill.step);
  const auto results = run_nodes(dir, nodes, 150);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1, joined:\n" << results[1].err);
  CHECK(results[1].killed_exit_code == 128 + SIGKILL);
  REQUIRE(results[0].exit_code == 0);
  REQUIRE(results[1].exit_code == 0);
  CHECK(results[0].err.find("joined: node 1 taken in: 1 replica × 1 stage on node 0 (gradient shares 2) -> 2 "
                            "replicas × 1 stage on nodes 0, 1,") != std::string::npos);
  CHECK(event_rows(dir.path() / "run", "replan").size() == 1);
  CHECK(event_rows(dir.path() / "run", "joined").size() == 1);
  const auto plan = nlohmann::json::parse(read_text(dir.path() / "run" / "plan.json"));
  CHECK(plan["generation"] == 2);
  CHECK(plan.value("gradient_shares", 1) == 1);

  check_final_weights(want, dir.path() / "run", kill.seed);
}

// After the shrink onto one replica of 2 stages, the node running its stage 1 is lost for
// good too: the second shrink counts the node the first one kept idle among the nodes
// present (actors/plan/replan_nodes.hpp), so the job goes on as one replica of 2 stages
// on node 0 and that node (not as one stage on node 0 alone), still the 2-replica bits.
TEST_CASE("2 replicas of 2 stages over 4 nodes, two lost one after the other: the second shrink seats the node the first left idle, bit for bit") {
  const KillStep kill = random_kill_step(3, 6);
  const int first = 1 + static_cast<int>(kill.seed % 3);
  std::vector<int> others;
  for (int n = 1; n < 4; ++n)
    if (n != first) others.push_back(n);
  const int second = others[0], idle = others[1];  // the first shrink seats nodes 0 and others[0]
  MESSAGE("node " << first << " is lost first, then node " << second << "; node " << idle << " is idle between");
  TempDir dir;
  const std::string& want = one_process_weights(dir, replica_job({}));
  auto nodes = job_on_nodes(4, replica_job({"--set", "fault.rejoin_timeout_s=2", "--set", "fault.inject=slow:stage=0:ms=15"}),
                            dir / "run", "replica-idle-shrink-test");
  nodes[static_cast<std::size_t>(first)].kill_at_node0_step = kill.step;
  nodes[static_cast<std::size_t>(second)].kill_when_node0_says = "replan: node " + std::to_string(first) + " lost for good";
  const auto results = run_nodes(dir, nodes, 180);
  INFO("node 0:\n" << results[0].err);
  INFO("node " << idle << ", idle between the shrinks:\n" << results[static_cast<std::size_t>(idle)].err);
  REQUIRE(results[0].exit_code == 0);
  CHECK(results[static_cast<std::size_t>(idle)].exit_code == 0);
  CHECK(results[static_cast<std::size_t>(first)].exit_code == 128 + SIGKILL);
  CHECK(results[static_cast<std::size_t>(second)].exit_code == 128 + SIGKILL);
  const auto replans = event_rows(dir.path() / "run", "replan");
  REQUIRE(replans.size() == 2);
  CHECK(replans[0]["lost_node"] == first);
  CHECK(replans[0]["to"]["nodes"] == nlohmann::json({0, second}));
  CHECK(replans[1]["lost_node"] == second);
  CHECK(replans[1]["to"]["replicas"] == 1);
  CHECK(replans[1]["to"]["stages"] == 2);
  CHECK(replans[1]["to"]["nodes"] == nlohmann::json({0, idle}));
  MESSAGE("second shrink: " << replans[1].dump());
  const auto plan = nlohmann::json::parse(read_text(dir.path() / "run" / "plan.json"));
  CHECK(plan["generation"] == 2);
  CHECK(plan["gradient_shares"] == 2);

  check_final_weights(want, dir.path() / "run", kill.seed);
}

// The node the shrink left idle is killed too: its loss (its silence, rendezvous.peer_silence_s)
// starts no recovery, and it is no longer counted (replan_nodes.hpp): when the first lost
// node is started again, the grow counts nodes 0, 1 and it, which hold one replica of 2
// stages already, so the joined process is refused and the job ends undisturbed, bit for
// bit. Counted still, the grow would have moved onto the dead node.
TEST_CASE("the node a shrink left idle is lost too: no recovery, and the grow no longer counts it") {
  constexpr int kLongSteps = 60;
  TempDir dir;
  const auto job = [](std::vector<std::string> extra) {
    auto args = replica_job({"--set", "train.steps=" + std::to_string(kLongSteps)});
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  const std::string& want = one_process_weights(dir, job({}));
  auto nodes = job_on_nodes(4, job({"--set", "fault.rejoin_timeout_s=2", "--set", "rendezvous.peer_silence_s=2", "--set",
                                    "fault.inject=slow:stage=0:ms=15"}),
                            dir / "run", "replica-idle-lost-test");
  restart_after_shrink(nodes[3], 3, 4);
  nodes[3].restart_when_node0_says = "node 2, in the job without a stage, was lost";
  nodes[2].kill_when_node0_says = "replan: node 3 lost for good";
  const auto results = run_nodes(dir, nodes, 180);
  INFO("node 0:\n" << results[0].err);
  INFO("node 3, started again:\n" << results[3].err);
  REQUIRE(results[0].exit_code == 0);
  REQUIRE(results[1].exit_code == 0);
  CHECK(results[2].exit_code == 128 + SIGKILL);
  CHECK(results[3].killed_exit_code == 128 + SIGKILL);
  CHECK(results[3].exit_code != 0);
  const std::string refused = "the joined node(s) are not taken in: the nodes present hold 1 replica × 2 stages already";
  CHECK(results[0].err.find(refused) != std::string::npos);
  CHECK(results[3].err.find(refused) != std::string::npos);
  CHECK(event_rows(dir.path() / "run", "replan").size() == 1);
  CHECK(event_rows(dir.path() / "run", "joined").empty());
  CHECK(recovery_rows(dir.path() / "run").size() == 1);  // the shrink's only
  check_final_weights(want, dir.path() / "run", 0);
}
