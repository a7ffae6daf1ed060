// A lost process of a multi-process run and its replacement (fault.rejoin_timeout_s):
// node 1 is killed with SIGKILL mid-run and started again with the same arguments; it
// finds the job running, rejoins, its stages restore node 0's copies of their snapshots,
// and the job ends with the weights of the run without the fault, bit for bit, while
// node 0 never exited. Without a replacement node 0 fails once the wait is over, naming
// the node and the key.
#include <doctest/doctest.h>
#include <signal.h>

#include <algorithm>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

constexpr int kSteps = 24;  // long enough for a kill at step 10 and crashes at steps 7 and 15

std::vector<std::string> rejoin_job(const std::vector<std::string>& extra) {
  auto args = tiny_job({"--set", "train.steps=" + std::to_string(kSteps), "--set",
                        "rendezvous.timeout_s=20"});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// Node 0 and node 1 of the rejoin job; node 1 is killed once node 0 printed `when`.
std::vector<NodeRun> two_nodes(const TempDir& dir, const std::string& when,
                               const std::vector<std::string>& extra) {
  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  std::vector<NodeRun> nodes;
  for (int n = 0; n < 2; ++n) {
    auto args = rejoin_job(extra);
    args.insert(args.end(), {"--nnodes", "2", "--node-rank", std::to_string(n), "--rdzv", rdzv,
                             "--out", dir / "run"});
    nodes.push_back(NodeRun{args, {{"CONVEYOR_TOKEN", "rejoin-test"}}, {}});
  }
  nodes[1].kill_when_node0_says = when;
  return nodes;
}

}  // namespace

TEST_CASE("a node killed with SIGKILL mid-run and started again rejoins: the one-process weights bit for bit, node 0 never exits") {
  TempDir dir;
  auto reference = rejoin_job({"--out", dir / "one"});
  reference.erase(reference.begin());  // train_ok adds "train"
  train_ok(reference, 120);

  auto nodes = two_nodes(dir, "step 10/" + std::to_string(kSteps), {"--set", "fault.rejoin_timeout_s=60"});
  nodes[1].restart_after_kill = true;
  const auto results = run_nodes(dir, nodes, 120);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1, killed:\n" << results[1].killed_err);
  INFO("node 1, replacement:\n" << results[1].err);
  CHECK(results[1].killed_exit_code == 128 + SIGKILL);
  require_all_ok(results);  // node 0 ran through; the replacement ended normally
  CHECK(results[1].err.find("this process replaces the lost node") != std::string::npos);
  CHECK(results[0].err.find("recovered from a lost process") != std::string::npos);
  // While it waited, node 0 said what for (a progress note and a node_lost row).
  CHECK(results[0].err.find("waiting up to 60 s (fault.rejoin_timeout_s) for node 1 to be "
                            "started again") != std::string::npos);
  bool lost_row = false;
  for (auto& row : read_jsonl(dir.path() / "run" / "metrics.jsonl"))
    if (row.value("event", "") == "node_lost")
      lost_row = row["node"] == 1 && row["rejoin_timeout_s"] == 60.0;
  CHECK(lost_row);

  const auto rows = recovery_rows(dir.path() / "run");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0]["fault"] == "node");
  // Node 1's stages, and maybe node 0's whose transfers to node 1 broke (respawned here).
  const auto respawned = rows[0]["respawned"].get<std::vector<int>>();
  CHECK(std::ranges::find(respawned, 2) != respawned.end());
  CHECK(std::ranges::find(respawned, 3) != respawned.end());
  CHECK(rows[0]["stages"] == nlohmann::json::array({2, 3}));
  // Node 0 holds a copy once all its bytes arrived: typically the step before the loss
  // (9 or 10 here), further back only when copies lag on a loaded machine.
  CHECK(rows[0]["restored_step"].get<int>() >= 6);
  CHECK(rows[0]["restored_step"].get<int>() <= rows[0]["step"].get<int>());
  MESSAGE("lost at step " << rows[0]["step"] << ", restored step " << rows[0]["restored_step"]
                          << ", " << rows[0]["recovery_ms"] << " ms from detection to the replay "
                          << "(the replacement's start-up included)");

  const std::string want = read_text(dir.path() / "one" / "weights.safetensors");
  const std::string got = read_text(dir.path() / "run" / "weights.safetensors");
  REQUIRE(got.size() == want.size());
  CHECK_MESSAGE(got == want, "weights differ from the run without the fault");
}

TEST_CASE("a lost node that nobody starts again fails node 0 after fault.rejoin_timeout_s naming it") {
  TempDir dir;
  auto nodes = two_nodes(dir, "step 4/" + std::to_string(kSteps),
                         {"--set", "fault.rejoin_timeout_s=2", "--set", "fault.shrink=never"});
  const auto start = std::chrono::steady_clock::now();
  const auto results = run_nodes(dir, nodes, 60);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO("node 0:\n" << results[0].err);
  CHECK(results[1].exit_code == 128 + SIGKILL);
  CHECK(results[0].exit_code == 1);
  CHECK(results[0].err.find("no replacement of node 1 joined within fault.rejoin_timeout_s (2 s)") !=
        std::string::npos);
  CHECK(s < 40);
  CHECK_FALSE(fs::exists(dir.path() / "run" / "weights.safetensors"));
}

TEST_CASE("a crashed stage of either process is respawned where it ran, with the same weights") {
  TempDir dir;
  auto reference = rejoin_job({"--out", dir / "one"});
  reference.erase(reference.begin());
  train_ok(reference, 120);

  // Stage 1 runs on node 0 (the coordinator's process), stage 2 on node 1, which
  // respawns it when node 0's directory asks (RespawnStage).
  auto nodes = two_nodes(dir, "", {"--set", "fault.inject=[crash:stage=1:step=7,crash:stage=2:step=15]"});
  const auto results = run_nodes(dir, nodes, 120);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  require_all_ok(results);
  const auto rows = recovery_rows(dir.path() / "run");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0]["fault"] == "crash");
  CHECK(rows[0]["respawned"] == nlohmann::json::array({1}));
  CHECK(rows[1]["fault"] == "crash");
  CHECK(rows[1]["respawned"] == nlohmann::json::array({2}));
  CHECK(read_text(dir.path() / "run" / "weights.safetensors") ==
        read_text(dir.path() / "one" / "weights.safetensors"));
}

TEST_CASE("a supervised node that dies is started again by its supervisor and rejoins with the same weights") {
  TempDir dir;
  auto reference = rejoin_job({"--out", dir / "one"});
  reference.erase(reference.begin());
  train_ok(reference, 120);

  // exit: kills node 1's process at the start of step 12 in its first attempt only. With
  // checkpoints written by then, its supervisor passes --resume latest too (for a job that
  // starts again whole), which a replacement does not use.
  auto nodes = two_nodes(dir, "", {"--set", "fault.inject=[exit:node=1:step=12]", "--set",
                                   "checkpoint.every=5"});
  const auto results = run_with_node1_rejoining(dir, nodes);
  INFO("node 1:\n" << results[1].err);
  CHECK(results[1].err.find("this process replaces the lost node (it takes its stages' state "
                            "from node 0, not from --resume)") != std::string::npos);
  const auto rows = recovery_rows(dir.path() / "run");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0]["fault"] == "node");
  CHECK(read_text(dir.path() / "run" / "weights.safetensors") ==
        read_text(dir.path() / "one" / "weights.safetensors"));
}

TEST_CASE("the middle node of 3 is killed and started again: node 2 reconnects to it too, same weights") {
  TempDir dir;
  auto reference = rejoin_job({"--set", "pipeline.stages=3", "--out", dir / "one"});
  reference.erase(reference.begin());
  train_ok(reference, 120);

  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  std::vector<NodeRun> nodes;
  for (int n = 0; n < 3; ++n) {
    auto args = rejoin_job({"--set", "pipeline.stages=3", "--set", "fault.rejoin_timeout_s=60"});
    args.insert(args.end(), {"--nnodes", "3", "--node-rank", std::to_string(n), "--rdzv", rdzv,
                             "--out", dir / "run"});
    nodes.push_back(NodeRun{args, {{"CONVEYOR_TOKEN", "rejoin-test-3"}}, {}});
  }
  nodes[1].kill_when_node0_says = "step 10/" + std::to_string(kSteps);
  nodes[1].restart_after_kill = true;
  const auto results = run_nodes(dir, nodes, 120);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1, replacement:\n" << results[1].err);
  INFO("node 2:\n" << results[2].err);
  CHECK(results[1].killed_exit_code == 128 + SIGKILL);
  require_all_ok(results);
  const auto rows = recovery_rows(dir.path() / "run");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0]["fault"] == "node");
  CHECK(rows[0]["stages"] == nlohmann::json::array({1}));
  CHECK(read_text(dir.path() / "run" / "weights.safetensors") ==
        read_text(dir.path() / "one" / "weights.safetensors"));
}

// Two failures at once on two nodes: node 1's process exits (restarted by its supervisor)
// and a stage of node 2 crashes at the start of the same step. Whichever the coordinator
// sees first, the other joins that recovery: one recovery, both ranks respawned, the
// fault-free weights.
TEST_CASE("a node lost and a stage of another node crashing in the same step make one recovery, same weights") {
  TempDir dir;
  auto reference = rejoin_job({"--set", "pipeline.stages=3", "--out", dir / "one"});
  reference.erase(reference.begin());
  train_ok(reference, 120);

  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  std::vector<NodeRun> nodes;
  for (int n = 0; n < 3; ++n) {
    auto args = rejoin_job({"--set", "pipeline.stages=3", "--set", "fault.rejoin_timeout_s=60",
                            "--set", "fault.inject=[exit:node=1:step=5,crash:stage=2:step=5]"});
    args.insert(args.end(), {"--nnodes", "3", "--node-rank", std::to_string(n), "--rdzv", rdzv,
                             "--out", dir / "run"});
    if (n == 1) args.push_back("--supervise");
    nodes.push_back(NodeRun{args, {{"CONVEYOR_TOKEN", "rejoin-test-3b"}}, {}});
  }
  const auto results = run_nodes(dir, nodes, 120);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  INFO("node 2:\n" << results[2].err);
  require_all_ok(results);
  const auto rows = recovery_rows(dir.path() / "run");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0]["fault"] == "node");
  auto respawned = rows[0]["respawned"].get<std::vector<int>>();
  std::ranges::sort(respawned);
  // Both failed ranks come back in that one recovery. Stage 0 may come back too (3 runs of 8
  // here): when node 1 dies while stage 0 still has a transfer in flight with it, that
  // transfer fails and stage 0 with it, and the recovery under way replaces it as well
  // (on_stage_down, coordinator_actor.cpp).
  MESSAGE("respawned: " << rows[0]["respawned"].dump());
  CHECK(std::ranges::includes(respawned, std::vector<int>{1, 2}));
  CHECK(std::ranges::includes(std::vector<int>{0, 1, 2}, respawned));
  CHECK(read_text(dir.path() / "run" / "weights.safetensors") ==
        read_text(dir.path() / "one" / "weights.safetensors"));
}

TEST_CASE("node 0 killed under supervisors: the whole job starts again from the newest checkpoint and ends with the same weights") {
  TempDir dir;
  auto reference = rejoin_job({"--out", dir / "one"});
  reference.erase(reference.begin());
  train_ok(reference, 120);

  // exit: kills node 0's process (the store, the coordinator) at the start of step 12 in
  // its first attempt. Node 1 loses the job and fails; both supervisors start their node
  // again with --resume latest (one folder here, as on a shared file system).
  auto nodes = two_nodes(dir, "", {"--set", "fault.inject=[exit:node=0:step=12]", "--set",
                                   "checkpoint.every=5", "--supervise"});
  const auto results = run_nodes(dir, nodes, 120);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  require_all_ok(results);
  CHECK(results[0].err.find("attempt 1 ended with signal 9") != std::string::npos);
  CHECK(results[0].err.find("starting attempt 2 of 4 from the newest checkpoint") != std::string::npos);
  CHECK(results[0].err.find("resuming from") != std::string::npos);
  CHECK(results[1].err.find("node 0 ended or became unreachable") != std::string::npos);
  CHECK(results[1].err.find("starting attempt 2 of 4 from the running job, which it rejoins, or "
                            "else (the whole job starts again) the newest checkpoint") !=
        std::string::npos);
  CHECK(read_text(dir.path() / "run" / "weights.safetensors") ==
        read_text(dir.path() / "one" / "weights.safetensors"));
}
