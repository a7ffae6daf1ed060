// A job over processes whose node 0 keeps no copy of the other nodes' snapshots
// (fault.buddy_copies off, the default for GPU stages, here on CPU stages so that the path
// runs without a GPU): a checkpoint asks node 1's stages for copies of its step only
// (CopySnapshot), a failed stage of node 1 recovers in place from its own process's
// snapshots, a SIGTERM still stops the job with a checkpoint, and a lost node rejoins with
// every stage sent back to the newest checkpoint; without checkpoints it ends the job, and
// without a wait for a replacement, supervisors make the whole job resume from the newest
// checkpoint. Each ends with the one-process run's weights bit for bit.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <signal.h>

#include <chrono>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

constexpr int kSteps = 20;

std::vector<std::string> job(const std::vector<std::string>& extra) {
  auto args = tiny_job({"--set", "train.steps=" + std::to_string(kSteps), "--set",
                        "rendezvous.timeout_s=20", "--set", "fault.buddy_copies=off"});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<NodeRun> two_nodes(const fs::path& out, const std::vector<std::string>& extra) {
  return job_on_nodes(2, job(extra), out, "no-buddy-test");
}

// The weights of the same job in one process, without faults (buddy copies do not apply).
const std::string& reference_weights(const TempDir& dir) { return one_process_weights(dir, job({})); }

}  // namespace

TEST_CASE("without buddy copies node 0 still checkpoints node 1's stages, a failed stage of node 1 recovers from its own snapshot, and both runs resumed end bitwise identical") {
  TempDir dir;
  const auto& want = reference_weights(dir);
  const fs::path run = dir.path() / "run";
  // A crash and a hang on node 1's stages, recovered in place from node 1's own snapshots
  // (the path of GPU stages across processes); checkpoints every 5 steps.
  auto results = run_nodes(
      dir,
      two_nodes(run, {"--set", "checkpoint.every=5", "--set", "checkpoint.keep=10", "--set",
                      "watchdog.timeout_s=1", "--set",
                      "fault.inject=[crash:stage=2:step=7,hang:stage=3:step=12]"}),
      120);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  require_all_ok(results);
  CHECK(results[0].err.find("recovered from a crash at step 7") != std::string::npos);
  CHECK(results[0].err.find("recovered from a hang at step 12") != std::string::npos);
  CHECK(read_text(run / "weights.safetensors") == want);
  for (int step : {5, 10, 15, 20}) CHECK(verified_shards(run, step) == 4);  // stages 2, 3: node 1

  // Resumed after step 10 over 2 processes, and in one.
  const std::string from = (run / "checkpoints" / "step-000010").string();
  results = run_nodes(dir, two_nodes(dir.path() / "again", {"--resume", from}), 120);
  require_all_ok(results);
  CHECK(read_text(dir.path() / "again" / "weights.safetensors") == want);
  CHECK(resumed_in_one_process(dir, job({}), from) == want);
}

TEST_CASE("without buddy copies a SIGTERM to node 1 checkpoints the whole job and the resumed run ends bitwise identical") {
  TempDir dir;
  const auto& want = reference_weights(dir);
  const fs::path run = dir.path() / "run";
  auto nodes = two_nodes(run, {});
  nodes[1].kill_when_node0_says = "step 6/";
  nodes[1].kill_signal = SIGTERM;
  auto results = run_nodes(dir, nodes, 120);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  require_all_ok(results);
  CHECK(results[0].err.find("SIGTERM to node 1: stopped after step") != std::string::npos);
  CHECK_FALSE(fs::exists(run / "weights.safetensors"));
  const auto rows = read_jsonl(run / "metrics.jsonl");
  REQUIRE(rows.back().at("event") == "stopped");
  const int step = rows.back().at("after_step").get<int>();
  CHECK(verified_shards(run, step) == 4);

  results = run_nodes(dir, two_nodes(run, {"--resume", "latest"}), 120);
  require_all_ok(results);
  CHECK(read_text(run / "weights.safetensors") == want);
}

TEST_CASE("without buddy copies or checkpoints a lost node ends the job at once instead of waiting fault.rejoin_timeout_s for a replacement") {
  TempDir dir;
  const fs::path run = dir.path() / "run";
  // fault.rejoin_timeout_s is 60 s: with buddy copies node 0 would wait that long.
  auto nodes = two_nodes(run, {"--set", "train.steps=400"});
  nodes[1].kill_when_node0_says = "step 20/";
  const auto start = std::chrono::steady_clock::now();
  const auto results = run_nodes(dir, nodes, 120);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO("node 0:\n" << results[0].err);
  CHECK(results[0].exit_code == 1);
  CHECK(results[0].err.find("node 1") != std::string::npos);
  CHECK(results[0].err.find("waiting up to") == std::string::npos);
  CHECK(results[0].err.find("the job takes no replacement for a lost node (node 0 keeps no copy "
                            "of the other nodes' snapshots (fault.buddy_copies is off) and no "
                            "checkpoint is written to go back to (checkpoint.every is 0))") !=
        std::string::npos);
  CHECK(seconds < 60);
  CHECK_FALSE(fs::exists(run / "weights.safetensors"));
}

TEST_CASE("without buddy copies a supervised node that dies rejoins and every stage goes back to the newest checkpoint, with the same weights") {
  TempDir dir;
  const auto& want = reference_weights(dir);
  const fs::path run = dir.path() / "run";
  // exit: kills node 1's process at the start of step 12 in its first attempt; its
  // supervisor starts it again, it rejoins, and node 0, which never exits, has every stage
  // (its own too: they hold no copy of node 1's step) load the checkpoint of step 10.
  auto nodes = two_nodes(run, {"--set", "checkpoint.every=5", "--set",
                               "fault.inject=[exit:node=1:step=12]"});
  const auto results = run_with_node1_rejoining(dir, nodes);
  INFO("node 0:\n" << results[0].err);
  CHECK(results[0].err.find("recovered from a lost process") != std::string::npos);
  const auto recoveries = recovery_rows(run);
  REQUIRE(recoveries.size() == 1);
  CHECK(recoveries[0]["fault"] == "node");
  CHECK(recoveries[0]["restored_step"] == 10);
  CHECK(recoveries[0]["restored_from"] ==
        "checkpoint " + (run / "checkpoints" / "step-000010").string());
  // The stages lost: node 1's (every stage replays steps 11 and on).
  CHECK(recoveries[0]["stages"] == nlohmann::json::array({2, 3}));
  CHECK(read_text(run / "weights.safetensors") == want);
}

TEST_CASE("without buddy copies and without a wait for a replacement a node lost under supervisors makes the whole job resume from its newest checkpoint, with the same weights") {
  TempDir dir;
  const auto& want = reference_weights(dir);
  const fs::path run = dir.path() / "run";
  // exit: kills node 1's process at the start of step 12 in its first attempt. Node 0
  // fails (fault.rejoin_timeout_s 0: node 1 cannot rejoin), and both supervisors start
  // their node again with --resume latest: step 10.
  auto nodes = two_nodes(run, {"--set", "checkpoint.every=5", "--set", "fault.rejoin_timeout_s=0",
                               "--set", "fault.inject=[exit:node=1:step=12]", "--supervise"});
  const auto results = run_nodes(dir, nodes, 120);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  require_all_ok(results);
  CHECK(results[0].err.find("starting attempt 2 of 4 from the newest checkpoint") != std::string::npos);
  CHECK(results[0].err.find("resuming from") != std::string::npos);
  CHECK(results[0].err.find("(step 10,") != std::string::npos);
  // Node 1's supervisor does not promise a rejoin this job cannot do.
  CHECK(results[1].err.find("which it rejoins") == std::string::npos);
  CHECK(read_text(run / "weights.safetensors") == want);
}

TEST_CASE("without buddy copies a run that gives up (fault.max_restarts) says it wrote no checkpoint of the newest snapshot") {
  TempDir dir;
  const fs::path run = dir.path() / "run";
  auto nodes = two_nodes(run, {"--set", "fault.max_restarts=0", "--set", "fault.inject=[crash:stage=2:step=7]"});
  const auto results = run_nodes(dir, nodes, 120);
  INFO("node 0:\n" << results[0].err);
  CHECK(results[0].exit_code != 0);
  CHECK(results[0].err.find("giving up") != std::string::npos);
  CHECK(results[0].err.find("no checkpoint of step 7: node 0 keeps no copy of the other nodes' "
                            "snapshots (fault.buddy_copies off)") != std::string::npos);
}
