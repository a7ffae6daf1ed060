// Issue 44's shrink (actors/coordinator/coordinator_shrink.cpp): 3 processes of one CPU
// stage each; node 2 is killed for good at a random step (the seed is printed) and nobody
// starts it again. Once fault.rejoin_timeout_s is over, nodes 0 and 1 take the job on 2
// stages, their state cut in memory from node 0's snapshots and buddy copies, replay from
// the step every stage held, and end with the weights of the run without the fault, bit
// for bit. The replan row, the log line and plan.json's generation say so.
#include <doctest/doctest.h>
#include <signal.h>

#include <cstdlib>
#include <random>
#include <string>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

constexpr int kSteps = 24;

std::vector<std::string> shrink_job(const std::vector<std::string>& extra) { return three_stage_job(kSteps, extra); }

}  // namespace

TEST_CASE("3 one-stage nodes, node 2 killed for good: nodes 0 and 1 go on with 2 stages and end with the fault-free weights bit for bit") {
  // CONVEYOR_TEST_SEED=<printed seed> replays a run's kill step.
  const char* given = std::getenv("CONVEYOR_TEST_SEED");
  const auto seed = given ? static_cast<std::uint32_t>(std::stoul(given)) : std::random_device{}();
  std::mt19937 random(seed);
  const int kill_step = std::uniform_int_distribution<int>(3, kSteps - 6)(random);
  MESSAGE("seed " << seed << ": node 2 is killed once node 0 reports step " << kill_step << " or later");

  TempDir dir;
  auto reference = shrink_job({"--out", dir / "one"});
  reference.erase(reference.begin());  // train_ok adds "train"
  train_ok(reference, 120);

  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  std::vector<NodeRun> nodes;
  for (int n = 0; n < 3; ++n) {
    auto args = shrink_job({"--set", "fault.rejoin_timeout_s=2"});
    args.insert(args.end(), {"--nnodes", "3", "--node-rank", std::to_string(n), "--rdzv", rdzv, "--out", dir / "run"});
    nodes.push_back(NodeRun{args, {{"CONVEYOR_TOKEN", "shrink-test"}}, {}});
  }
  // Progress lines come a few times a second, not every step: "or later".
  nodes[2].kill_at_node0_step = kill_step;
  const auto start = std::chrono::steady_clock::now();
  const auto results = run_nodes(dir, nodes, 150);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  CHECK(results[2].exit_code == 128 + SIGKILL);
  REQUIRE(results[0].exit_code == 0);
  REQUIRE(results[1].exit_code == 0);
  CHECK(results[0].err.find("replan: node 2 lost for good") != std::string::npos);
  // The progress bar says what runs after the shrink.
  CHECK(progress_line(results[0].err, kSteps).ends_with("  2 nodes, 2 stages live"));
  CHECK(results[1].err.find("node 1 moves onto 1 replica × 2 stages") != std::string::npos);

  std::vector<nlohmann::json> replans;
  for (auto& row : read_jsonl(dir.path() / "run" / "metrics.jsonl"))
    if (row.value("event", "") == "replan") replans.push_back(row);
  REQUIRE(replans.size() == 1);
  const auto& r = replans[0];
  CHECK(r["lost_node"] == 2);
  CHECK(r["from"]["stages"] == 3);
  CHECK(r["from"]["nodes"] == nlohmann::json::array({0, 1, 2}));
  CHECK(r["to"]["stages"] == 2);
  CHECK(r["to"]["replicas"] == 1);
  CHECK(r["to"]["nodes"] == nlohmann::json::array({0, 1}));
  CHECK(r["to"]["partition"] == nlohmann::json::array({2, 2}));
  CHECK(r["restored_from"] == "buddy copies");
  CHECK(r["steps_redone"].get<int>() >= 0);
  CHECK(r["ms"].get<double>() > 0);
  MESSAGE("replan after the kill at step " << kill_step << ": " << r.dump() << "; the whole job took " << s << " s");

  const auto plan = nlohmann::json::parse(read_text(dir.path() / "run" / "plan.json"));
  CHECK(plan["generation"] == 1);

  const std::string want = read_text(dir.path() / "one" / "weights.safetensors");
  check_final_weights(want, dir.path() / "run", seed);
}

TEST_CASE("with fault.shrink never the job fails at the rejoin deadline as before, saying why it did not shrink") {
  TempDir dir;
  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  std::vector<NodeRun> nodes;
  for (int n = 0; n < 3; ++n) {
    auto args = shrink_job({"--set", "fault.rejoin_timeout_s=2", "--set", "fault.shrink=never"});
    args.insert(args.end(), {"--nnodes", "3", "--node-rank", std::to_string(n), "--rdzv", rdzv, "--out", dir / "run"});
    nodes.push_back(NodeRun{args, {{"CONVEYOR_TOKEN", "shrink-never-test"}}, {}});
  }
  nodes[2].kill_when_node0_says = "step 4/" + std::to_string(kSteps);
  const auto results = run_nodes(dir, nodes, 90);
  INFO("node 0:\n" << results[0].err);
  CHECK(results[0].exit_code == 1);
  CHECK(results[0].err.find("no replacement of node 2 joined within fault.rejoin_timeout_s (2 s), and the job "
                            "cannot go on without it: fault.shrink is never") != std::string::npos);
}
