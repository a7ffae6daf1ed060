// Checkpoints of a job over several processes: node 0 writes every node's stages from its
// snapshot store (its own snapshots and the copies the other nodes send it), so a
// checkpoint of 2 processes holds all 4 stages' shards; every node resumes its own stages
// from it (one path for all: here one host), and a SIGTERM to node 0 checkpoints and ends
// both processes cleanly. Resumed runs end with the one-process run's weights bit for bit,
// also when the checkpoint of 2 processes resumes in one.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <signal.h>

#include "actors/checkpoint/reader.hpp"
#include "actors/checkpoint/filesystem.hpp"
#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

constexpr int kSteps = 20;

std::vector<std::string> job(const std::vector<std::string>& extra) {
  auto args = tiny_job({"--set", "train.steps=" + std::to_string(kSteps), "--set",
                        "rendezvous.timeout_s=20"});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<NodeRun> two_nodes(const fs::path& out, const std::vector<std::string>& extra) {
  return job_on_nodes(2, job(extra), out, "checkpoint-test");
}

const std::string& reference_weights(const TempDir& dir) { return one_process_weights(dir, job({})); }

// The run's last metrics row, which a stopped run ends with.
nlohmann::json stopped_row(const fs::path& run) {
  const auto rows = read_jsonl(run / "metrics.jsonl");
  REQUIRE_FALSE(rows.empty());
  REQUIRE(rows.back().at("event") == "stopped");
  return rows.back();
}

}  // namespace

TEST_CASE("2 processes checkpoint every stage from node 0, resuming over 2 processes or in 1 ends with the same weights") {
  TempDir dir;
  const auto& want = reference_weights(dir);
  const fs::path run = dir.path() / "run";
  auto results = run_nodes(dir, two_nodes(run, {"--set", "checkpoint.every=5", "--set", "checkpoint.keep=10"}), 120);
  require_all_ok(results);
  CHECK(read_text(run / "weights.safetensors") == want);
  for (int step : {5, 10, 15, 20}) {
    const auto step_dir = run / "checkpoints" / fmt::format("step-{:06d}", step);
    INFO(step_dir.string());
    const auto manifest = conveyor::checkpoint::verify_checkpoint(
        conveyor::checkpoint::posix_filesystem(), step_dir.string());
    CHECK(manifest.shards.size() == 4);  // stages 2 and 3 ran on node 1
  }

  // Resumed after step 10, over 2 processes again (each node reads its own stages); node 1
  // supervised, whose supervisor used to drop the --resume of its first attempt (node 1
  // then started from scratch and the nodes refused each other).
  const fs::path again = dir.path() / "again";
  const std::string from = (run / "checkpoints" / "step-000010").string();
  auto resumed = two_nodes(again, {"--resume", from});
  resumed[1].args.push_back("--supervise");
  results = run_nodes(dir, resumed, 120);
  INFO("node 1:\n" << results[1].err);
  require_all_ok(results);
  CHECK(read_text(again / "weights.safetensors") == want);

  // ... and in one process.
  CHECK(resumed_in_one_process(dir, job({}), from) == want);
}

TEST_CASE("SIGTERM to either node of 2 processes checkpoints, ends both with exit 0, and the resumed run ends bitwise identical") {
  TempDir dir;
  const auto& want = reference_weights(dir);
  for (int signalled : {0, 1}) {
    CAPTURE(signalled);
    const fs::path run = dir.path() / ("run" + std::to_string(signalled));
    // checkpoint.every 0 (the default): only the stop's checkpoint. Node 1 forwards its
    // signal to node 0, whose coordinator stops the whole job.
    auto nodes = two_nodes(run, {});
    nodes[signalled].kill_when_node0_says = "step 6/";
    nodes[signalled].kill_signal = SIGTERM;
    auto results = run_nodes(dir, nodes, 120);
    INFO("node 0:\n" << results[0].err);
    INFO("node 1:\n" << results[1].err);
    require_all_ok(results);
    CHECK(results[0].err.find(signalled == 0 ? "SIGTERM: stopped after step" : "SIGTERM to node 1: stopped after step") !=
          std::string::npos);
    CHECK_FALSE(fs::exists(run / "weights.safetensors"));
    CHECK(stopped_row(run)["checkpoint"].is_string());

    results = run_nodes(dir, two_nodes(run, {"--resume", "latest"}), 120);
    require_all_ok(results);
    CHECK(read_text(run / "weights.safetensors") == want);
  }
}

TEST_CASE("SIGHUP to node 1 of 2 processes stops the job as SIGTERM does: node 0 checkpoints, both exit 0") {
  TempDir dir;
  const fs::path run = dir.path() / "run";
  // Before: UCX's debug handler took SIGHUP (UCX_DEBUG_SIGNO): the job trained on.
  auto nodes = two_nodes(run, {"--set", "train.steps=200"});
  nodes[1].kill_when_node0_says = "step 20/";  // progress every 10 steps
  nodes[1].kill_signal = SIGHUP;
  const auto results = run_nodes(dir, nodes, 60);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  require_all_ok(results);
  CHECK(results[0].err.find("SIGHUP to node 1: stopped after step") != std::string::npos);
  CHECK_FALSE(fs::exists(run / "weights.safetensors"));
  const auto stopped = stopped_row(run);
  CHECK(stopped["reason"] == "SIGHUP");
  CHECK(stopped["signalled_node"] == 1);
  CHECK(stopped["checkpoint"].is_string());
}

TEST_CASE("a stop across processes waits for the next step every node snapshotted (fault.snapshot_every)") {
  TempDir dir;
  const fs::path run = dir.path() / "run";
  // Before: a stop after step 22 waited 30 s for node 1's snapshot of step 22, which
  // never comes, and failed the run.
  auto nodes = two_nodes(run, {"--set", "train.steps=200", "--set", "fault.snapshot_every=7"});
  nodes[0].kill_when_node0_says = "step 20/";  // progress every 10 steps
  nodes[0].kill_signal = SIGTERM;
  const auto results = run_nodes(dir, nodes, 120);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  require_all_ok(results);
  const auto step = stopped_row(run)["after_step"].get<std::int64_t>();
  CHECK(step % 7 == 0);
  const auto manifest = conveyor::checkpoint::verify_checkpoint(
      conveyor::checkpoint::posix_filesystem(), (run / "checkpoints" / fmt::format("step-{:06d}", step)).string());
  CHECK(manifest.shards.size() == 4);
}

TEST_CASE("a job over processes that cannot checkpoint stops at the next step on SIGTERM, in order, saying why") {
  TempDir dir;
  const fs::path run = dir.path() / "run";
  // Before: node 0 died of the signal (143) and node 1 failed on its lost peer (1); a
  // SIGTERM to node 1 left node 0 waiting fault.rejoin_timeout_s for it.
  auto nodes = two_nodes(run, {"--set", "train.steps=200", "--set", "fault.snapshot_every=0"});
  nodes[1].kill_when_node0_says = "step 20/";
  nodes[1].kill_signal = SIGTERM;
  const auto results = run_nodes(dir, nodes, 120);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  CHECK(results[0].exit_code == 128 + SIGTERM);  // the shell's code for it: nothing to resume
  CHECK(results[1].exit_code == 0);
  CHECK(results[0].err.find("without a checkpoint: node 0 writes the checkpoints of every node from the in-memory "
                            "snapshots, so fault.snapshot_every must be > 0") != std::string::npos);
  CHECK(results[1].err.find("node 1 caught a stop signal") != std::string::npos);
  CHECK_FALSE(fs::exists(run / "checkpoints"));
  CHECK_FALSE(fs::exists(run / "weights.safetensors"));
  const auto stopped = stopped_row(run);
  CHECK(stopped["checkpoint"].is_null());
  CHECK(stopped["signalled_node"] == 1);
  CHECK(stopped["after_step"].get<std::int64_t>() < 200);
}

TEST_CASE("nodes that would resume from different checkpoints are stopped at start, naming both") {
  TempDir dir;
  const fs::path run = dir.path() / "run";
  auto results = run_nodes(dir, two_nodes(run, {"--set", "checkpoint.every=5", "--set", "checkpoint.keep=10"}), 120);
  require_all_ok(results);
  auto nodes = two_nodes(dir.path() / "bad", {});
  nodes[0].args.insert(nodes[0].args.end(), {"--resume", (run / "checkpoints" / "step-000005").string()});
  nodes[1].args.insert(nodes[1].args.end(), {"--resume", (run / "checkpoints" / "step-000010").string()});
  results = run_nodes(dir, nodes, 60);
  INFO("node 0:\n" << results[0].err);
  CHECK(results[0].exit_code == 2);
  CHECK(results[1].exit_code == 2);
  CHECK(results[1].err.find("node 1 resumes after step 10, node 0 resumes after step 5") != std::string::npos);
}
