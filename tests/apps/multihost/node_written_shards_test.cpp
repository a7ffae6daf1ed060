// checkpoint.writers every_node: node 1 writes its own stages' shards of every checkpoint
// (into node 0's staging folder; here both processes share the machine's filesystem) and
// node 0 moves them into place: no stage state crosses the network. The checkpoints verify,
// a recovery and a SIGTERM behave as with node 0 writing everything, and runs resumed
// from them, or a lost node that rejoins and sends every stage back to them, end with the
// one-process run's weights bit for bit.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <signal.h>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

constexpr int kSteps = 20;

std::vector<std::string> job(const std::vector<std::string>& extra) {
  auto args = tiny_job({"--set", "train.steps=" + std::to_string(kSteps), "--set", "rendezvous.timeout_s=20",
                        "--set", "checkpoint.writers=every_node"});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<NodeRun> two_nodes(const fs::path& out, const std::vector<std::string>& extra) {
  return job_on_nodes(2, job(extra), out, "node-shards-test");
}

const std::string& reference_weights(const TempDir& dir) { return one_process_weights(dir, job({})); }

bool wrote(const std::string& log, int stage, int step) {
  return log.find(fmt::format("node 1 wrote stage {}'s shard of step {} (", stage, step)) != std::string::npos;
}

}  // namespace

TEST_CASE("with checkpoint.writers every_node node 1 writes its stages' shards itself, through a recovery, and the checkpoints resume bitwise identical") {
  TempDir dir;
  const auto& want = reference_weights(dir);
  const fs::path run = dir.path() / "run";
  // Without buddy copies (node 0 holds only notes of node 1's snapshots) and a crash of a
  // stage of node 1 recovered in place from its own snapshot.
  auto results = run_nodes(dir,
                           two_nodes(run, {"--set", "checkpoint.every=5", "--set", "checkpoint.keep=10", "--set",
                                           "fault.buddy_copies=off", "--set", "fault.inject=[crash:stage=2:step=7]"}),
                           120);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  require_all_ok(results);
  CHECK(results[0].err.find("recovered from a crash at step 7") != std::string::npos);
  CHECK(read_text(run / "weights.safetensors") == want);
  for (int step : {5, 10, 15, 20}) {
    CHECK(verified_shards(run, step) == 4);
    CHECK(wrote(results[1].err, 2, step));  // stages 2 and 3 run on node 1
    CHECK(wrote(results[1].err, 3, step));
  }
  CHECK_FALSE(fs::exists(run / "checkpoints" / ".incoming" / "step-000020"));  // placed and cleaned

  const std::string from = (run / "checkpoints" / "step-000010").string();
  CHECK(resumed_in_one_process(dir, job({}), from) == want);
}

TEST_CASE("with checkpoint.writers every_node a SIGTERM to node 1 stops the job with a checkpoint node 1 wrote its part of") {
  TempDir dir;
  const auto& want = reference_weights(dir);
  const fs::path run = dir.path() / "run";
  auto nodes = two_nodes(run, {});  // buddy copies on (CPU stages): node 1 still writes its own
  nodes[1].kill_when_node0_says = "step 6/";
  nodes[1].kill_signal = SIGTERM;
  auto results = run_nodes(dir, nodes, 120);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  require_all_ok(results);
  CHECK(results[0].err.find("SIGTERM to node 1: stopped after step") != std::string::npos);
  const auto rows = read_jsonl(run / "metrics.jsonl");
  REQUIRE(rows.back().at("event") == "stopped");
  const int step = rows.back().at("after_step").get<int>();
  CHECK(verified_shards(run, step) == 4);
  CHECK(wrote(results[1].err, 2, step));

  results = run_nodes(dir, two_nodes(run, {"--resume", "latest"}), 120);
  require_all_ok(results);
  CHECK(read_text(run / "weights.safetensors") == want);
}

TEST_CASE("with checkpoint.writers every_node a supervised node that dies rejoins and every stage loads the checkpoint both nodes wrote, with the same weights") {
  TempDir dir;
  const auto& want = reference_weights(dir);
  const fs::path run = dir.path() / "run";
  // Node 1's process is killed as step 12 starts (its first attempt only); its supervisor
  // starts it again and it rejoins. Without buddy copies node 0 holds nothing of stages 2
  // and 3: every stage loads step 10, whose shards of stages 2 and 3 node 1 wrote itself.
  auto nodes = two_nodes(run, {"--set", "checkpoint.every=5", "--set", "fault.buddy_copies=off", "--set",
                               "fault.inject=[exit:node=1:step=12]"});
  const auto results = run_with_node1_rejoining(dir, nodes);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  CHECK(results[0].err.find(fmt::format("(every stage loaded checkpoint {}), every stage back at step 10",
                                        (run / "checkpoints" / "step-000010").string())) !=
        std::string::npos);
  CHECK(wrote(results[1].err, 2, 10));
  CHECK(read_text(run / "weights.safetensors") == want);
}

TEST_CASE("with checkpoint.writers every_node a node lost while it writes its shards takes that checkpoint down, not the run: it rejoins from the one before and the run exits 0 with the same weights") {
  TempDir dir;
  const auto& want = reference_weights(dir);
  const fs::path run = dir.path() / "run";
  // Node 1 is killed as it starts writing its shards of step 10's checkpoint (its first
  // attempt only): that checkpoint cannot complete, so every stage goes back to step 5's
  // and replays; step 10's checkpoint is then taken again.
  auto nodes = two_nodes(run, {"--set", "checkpoint.every=5", "--set", "checkpoint.keep=10", "--set",
                               "fault.buddy_copies=off", "--set", "fault.inject=[exit:node=1:step=10:when=checkpoint]"});
  const auto results = run_with_node1_rejoining(dir, nodes);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  CHECK(results[1].err.find("this process dies writing its shard of step 10") != std::string::npos);
  CHECK(results[0].err.find("the checkpoint of step 10 went down with node 1") != std::string::npos);
  CHECK(results[0].err.find(fmt::format("(every stage loaded checkpoint {}), every stage back at step 5",
                                        (run / "checkpoints" / "step-000005").string())) !=
        std::string::npos);
  const auto rows = read_jsonl(run / "metrics.jsonl");
  REQUIRE_FALSE(rows.empty());
  CHECK(rows.back()["event"] == "summary");
  CHECK(rows.back()["lost_checkpoints"] == nlohmann::json::parse(R"([{"step": 10, "node": 1}])"));
  CHECK(read_text(run / "weights.safetensors") == want);
  for (int step : {5, 10, 15, 20}) CHECK(verified_shards(run, step) == 4);  // step 10's taken again
}
