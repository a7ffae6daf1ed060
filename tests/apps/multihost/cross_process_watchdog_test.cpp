// The hang watchdog of a job over processes: node 0 watches every rank, its own and
// those the other nodes report (actors/trace/remote_progress.hpp). Before, the watchdog
// ran in one-process jobs only: a stage of node 1 that never started its step left the
// whole job waiting forever, SIGTERM included (the stop waits for a step boundary that
// never comes).
#include <doctest/doctest.h>

#include <chrono>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

constexpr int kSteps = 16;

std::vector<std::string> watched_job(const std::vector<std::string>& extra) {
  auto args = tiny_job({"--set", "train.steps=" + std::to_string(kSteps), "--set",
                        "rendezvous.timeout_s=20", "--set", "watchdog.timeout_s=1"});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<NodeRun> two_nodes(const TempDir& dir, const std::vector<std::string>& extra) {
  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  std::vector<NodeRun> nodes;
  for (int n = 0; n < 2; ++n) {
    auto args = watched_job(extra);
    args.insert(args.end(), {"--nnodes", "2", "--node-rank", std::to_string(n), "--rdzv", rdzv,
                             "--out", (dir.path() / "run").string()});
    nodes.push_back(NodeRun{args, {{"CONVEYOR_TOKEN", "watchdog-test"}}, {}});
  }
  return nodes;
}

}  // namespace

TEST_CASE("a stage of node 1 that hangs is diagnosed by node 0's watchdog, respawned on node 1, and the job ends with the one-process weights") {
  TempDir dir;
  auto reference = watched_job({"--out", (dir.path() / "one").string()});
  reference.erase(reference.begin());  // train_ok adds "train"
  train_ok(reference, 120);

  // Stage 2 runs on node 1 and never starts step 5; stage 3 (node 1) drops the first
  // gradient it sends in step 11, to stage 2 on its own node.
  const auto nodes = two_nodes(
      dir, {"--set", "fault.inject=[hang:stage=2:step=5,drop:stage=3:step=11:kind=gradient]"});
  const auto results = run_nodes(dir, nodes, 120);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  require_all_ok(results);
  CHECK(results[0].err.find("watchdog: no progress for 1.0 s") != std::string::npos);
  CHECK(results[0].err.find("stage 2 finished step 4 and waits for the coordinator's next plan") !=
        std::string::npos);
  std::vector<nlohmann::json> rows;
  for (auto& row : read_jsonl(dir.path() / "run" / "metrics.jsonl"))
    if (row.value("event", "") == "recovery") rows.push_back(row);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0]["fault"] == "hang");
  CHECK(rows[0]["respawned"] == nlohmann::json::array({2}));
  CHECK(rows[1]["fault"] == "hang");
  CHECK(read_text(dir.path() / "run" / "weights.safetensors") ==
        read_text(dir.path() / "one" / "weights.safetensors"));
}

TEST_CASE("under fault.policy abort a hang on node 1 stops both nodes within seconds: node 0 exits 3 with the wait-for graph") {
  TempDir dir;
  const auto nodes = two_nodes(dir, {"--set", "train.steps=400", "--set", "fault.policy=abort",
                                     "--set", "fault.inject=[hang:stage=3:step=3]"});
  const auto began = std::chrono::steady_clock::now();
  const auto results = run_nodes(dir, nodes, 60);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  REQUIRE_FALSE(results[0].timed_out);
  REQUIRE_FALSE(results[1].timed_out);
  CHECK(results[0].exit_code == 3);
  CHECK(results[0].err.find("watchdog: stalled: stage 3 is idle") != std::string::npos);
  CHECK(results[0].err.find("error: the hang watchdog stopped the run") != std::string::npos);
  CHECK(results[1].exit_code == 1);
  CHECK(results[1].err.find("because the job failed there: hang: stalled: stage 3") !=
        std::string::npos);
  CHECK(seconds < 30);
}

TEST_CASE("waiting longer than watchdog.timeout_s for a lost node's replacement is no hang: the job recovers with the same weights") {
  TempDir dir;
  auto reference = watched_job({"--out", (dir.path() / "one").string()});
  reference.erase(reference.begin());
  train_ok(reference, 120);

  auto nodes = two_nodes(dir, {"--set", "fault.rejoin_timeout_s=60"});
  nodes[1].kill_when_node0_says = "step 6/" + std::to_string(kSteps);
  nodes[1].restart_after_kill = true;
  // Every start of node 1 waits 3 s first: the replacement comes well after node 0's
  // stages have waited watchdog.timeout_s (1 s) for it.
  nodes[1].wrapper = {"sh", "-c", "sleep 3; exec \"$0\" \"$@\""};
  const auto results = run_nodes(dir, nodes, 120);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1, replacement:\n" << results[1].err);
  require_all_ok(results);
  CHECK(results[0].err.find("recovered from a lost process") != std::string::npos);
  CHECK(results[0].err.find("watchdog:") == std::string::npos);
  CHECK(read_text(dir.path() / "run" / "weights.safetensors") ==
        read_text(dir.path() / "one" / "weights.safetensors"));
}
