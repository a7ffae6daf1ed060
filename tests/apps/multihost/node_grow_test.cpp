// Issue 44's grow (actors/coordinator/coordinator_grow.cpp): 3 processes of one CPU stage
// each; node 2 is killed for good at a random step (the seed is printed) and, once the job
// shrank onto nodes 0 and 1, a new process is started for node 2 with the same command.
// It joins, and at the next step boundary the job goes back to 3 stages, the state cut
// in memory from node 0's snapshots of that boundary; the run ends with the weights of the
// run without the fault, bit for bit. The joined row, the log lines and plan.json's
// generation say so. With fault.grow never the new process is refused and exits naming
// the key, while the job ends on 2 stages. A node taken in and lost again shrinks the job
// a second time.
#include <doctest/doctest.h>
#include <signal.h>

#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

// Enough steps that the shrunk job still runs when the new process has joined: stage 0's
// compute actions sleep a little (fault.inject slow: timing only, the numbers are the same).
constexpr int kSteps = 48;

std::vector<std::string> grow_job(const std::vector<std::string>& extra) {
  auto args = tiny_job({"--set", "train.steps=" + std::to_string(kSteps), "--set", "rendezvous.timeout_s=20",
                        "--set", "pipeline.stages=3"});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<NodeRun> three_nodes(const TempDir& dir, const std::vector<std::string>& extra,
                                 const std::string& token) {
  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  std::vector<NodeRun> nodes;
  for (int n = 0; n < 3; ++n) {
    auto args = grow_job(extra);
    args.insert(args.end(), {"--nnodes", "3", "--node-rank", std::to_string(n), "--rdzv", rdzv, "--out", dir / "run"});
    nodes.push_back(NodeRun{args, {{"CONVEYOR_TOKEN", token}}, {}});
  }
  return nodes;
}

std::vector<nlohmann::json> rows_of(const fs::path& run, const std::string& event) {
  std::vector<nlohmann::json> rows;
  for (auto& row : read_jsonl(run / "metrics.jsonl"))
    if (row.value("event", "") == event) rows.push_back(row);
  return rows;
}

}  // namespace

TEST_CASE("3 one-stage nodes, node 2 killed for good and started again after the shrink: the job grows back to 3 stages and ends with the fault-free weights bit for bit") {
  // CONVEYOR_TEST_SEED=<printed seed> replays a run's kill step.
  const char* given = std::getenv("CONVEYOR_TEST_SEED");
  const auto seed = given ? static_cast<std::uint32_t>(std::stoul(given)) : std::random_device{}();
  std::mt19937 random(seed);
  const int kill_step = std::uniform_int_distribution<int>(3, 12)(random);
  MESSAGE("seed " << seed << ": node 2 is killed once node 0 reports step " << kill_step << " or later");

  TempDir dir;
  auto reference = grow_job({"--out", dir / "one"});
  reference.erase(reference.begin());  // train_ok adds "train"
  train_ok(reference, 120);

  auto nodes = three_nodes(dir, {"--set", "fault.rejoin_timeout_s=2", "--set", "fault.inject=slow:stage=0:ms=15"},
                           "grow-test");
  nodes[2].kill_at_node0_step = kill_step;
  nodes[2].restart_after_kill = true;
  nodes[2].restart_when_node0_says = "replan: node 2 lost for good";
  const auto results = run_nodes(dir, nodes, 150);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  INFO("node 2, joined:\n" << results[2].err);
  CHECK(results[2].killed_exit_code == 128 + SIGKILL);
  REQUIRE(results[0].exit_code == 0);
  REQUIRE(results[1].exit_code == 0);
  REQUIRE(results[2].exit_code == 0);
  CHECK(results[0].err.find("node 2 joined the shrunk job: it is taken in at the next step boundary "
                            "(fault.grow at_step)") != std::string::npos);
  CHECK(results[0].err.find("joined: node 2 taken in: 1 replica × 2 stages on nodes 0, 1 -> 1 replica × 3 "
                            "stages on nodes 0, 1, 2") != std::string::npos);
  CHECK(results[1].err.find("node 1 moves onto 1 replica × 3 stages (layout generation 2)") != std::string::npos);
  CHECK(results[2].err.find("node 2 moves onto 1 replica × 3 stages (layout generation 2): stage(s) [2] here") !=
        std::string::npos);

  const auto run = dir.path() / "run";
  const auto replans = rows_of(run, "replan");
  REQUIRE(replans.size() == 1);
  CHECK(replans[0]["lost_node"] == 2);
  CHECK(replans[0]["to"]["stages"] == 2);
  const auto joins = rows_of(run, "joined");
  REQUIRE(joins.size() == 1);
  const auto& j = joins[0];
  CHECK(j["node"] == 2);
  CHECK(j["from"]["stages"] == 2);
  CHECK(j["from"]["nodes"] == nlohmann::json::array({0, 1}));
  CHECK(j["to"]["stages"] == 3);
  CHECK(j["to"]["replicas"] == 1);
  CHECK(j["to"]["nodes"] == nlohmann::json::array({0, 1, 2}));
  CHECK(j["to"]["partition"] == replans[0]["from"]["partition"]);  // the configured cut again
  CHECK(j["restored_from"] == "snapshot");
  CHECK(j["steps_redone"] == 0);
  CHECK(j["ms"].get<double>() > 0);
  MESSAGE("kill at step " << kill_step << ": " << replans[0].dump() << "; " << j.dump());

  // Every step's loss is the fault-free run's, bit for bit (a step the shrink replayed is
  // logged twice, with the same loss): no micro-batch was skipped or seen twice.
  std::map<int, double> want_loss;
  for (auto& row : read_jsonl(dir.path() / "one" / "metrics.jsonl"))
    if (!row.contains("event") && row.contains("loss")) want_loss[row["step"].get<int>()] = row["loss"].get<double>();
  std::set<int> logged;
  for (auto& row : read_jsonl(run / "metrics.jsonl"))
    if (!row.contains("event") && row.contains("loss")) {
      const int step = row["step"].get<int>();
      logged.insert(step);
      CHECK_MESSAGE(row["loss"].get<double>() == want_loss.at(step), "step " << step << "'s loss differs");
    }
  CHECK(logged.size() == static_cast<std::size_t>(kSteps));

  const auto plan = nlohmann::json::parse(read_text(run / "plan.json"));
  CHECK(plan["generation"] == 2);

  const std::string want = read_text(dir.path() / "one" / "weights.safetensors");
  const std::string got = read_text(run / "weights.safetensors");
  REQUIRE(got.size() == want.size());
  CHECK_MESSAGE(got == want, "weights differ from the run without the fault (seed " << seed << ")");
}

TEST_CASE("with fault.grow never a node that joins the shrunk job is refused naming the key, and the job ends on 2 stages") {
  TempDir dir;
  auto nodes = three_nodes(dir,
                           {"--set", "fault.rejoin_timeout_s=2", "--set", "fault.grow=never", "--set",
                            "fault.inject=slow:stage=0:ms=15"},
                           "grow-never-test");
  nodes[2].kill_at_node0_step = 4;
  nodes[2].restart_after_kill = true;
  nodes[2].restart_when_node0_says = "replan: node 2 lost for good";
  const auto results = run_nodes(dir, nodes, 150);
  INFO("node 0:\n" << results[0].err);
  INFO("node 2, joined:\n" << results[2].err);
  REQUIRE(results[0].exit_code == 0);
  REQUIRE(results[1].exit_code == 0);
  CHECK(results[2].exit_code != 0);
  CHECK(results[2].err.find("node 2 joined a job that shrank without it, but the job takes no node back: "
                            "fault.grow is never") != std::string::npos);
  CHECK(results[0].err.find("the job takes no node back: fault.grow is never") != std::string::npos);
  CHECK(rows_of(dir.path() / "run", "joined").empty());
  const auto plan = nlohmann::json::parse(read_text(dir.path() / "run" / "plan.json"));
  CHECK(plan["generation"] == 1);
}

TEST_CASE("a node taken in and lost again: the job shrinks a second time (generation 3) and still ends with the fault-free weights") {
  TempDir dir;
  auto reference = grow_job({"--out", dir / "one"});
  reference.erase(reference.begin());  // train_ok adds "train"
  train_ok(reference, 120);
  auto nodes = three_nodes(dir, {"--set", "fault.rejoin_timeout_s=2", "--set", "fault.inject=slow:stage=0:ms=15"},
                           "grow-twice-test");
  nodes[2].kill_at_node0_step = 5;
  nodes[2].restart_after_kill = true;
  nodes[2].restart_when_node0_says = "replan: node 2 lost for good";
  nodes[2].kill_again_when_node0_says = "joined: node 2 taken in";
  const auto results = run_nodes(dir, nodes, 150);
  INFO("node 0:\n" << results[0].err);
  INFO("node 2, joined:\n" << results[2].err);
  REQUIRE(results[0].exit_code == 0);
  REQUIRE(results[1].exit_code == 0);
  CHECK(results[2].exit_code == 128 + SIGKILL);  // the process that joined, killed in turn
  const auto run = dir.path() / "run";
  std::vector<std::string> events;
  for (auto& row : read_jsonl(run / "metrics.jsonl")) {
    const std::string e = row.value("event", "");
    if (e == "replan" || e == "joined") events.push_back(e);
  }
  CHECK(events == std::vector<std::string>{"replan", "joined", "replan"});
  CHECK(nlohmann::json::parse(read_text(run / "plan.json"))["generation"] == 3);
  CHECK_MESSAGE(read_text(run / "weights.safetensors") == read_text(dir.path() / "one" / "weights.safetensors"),
                "weights differ from the run without the fault");
}

TEST_CASE("nodes 2 then 1 lost for good, the job on node 0 alone, then node 1 started again joins without dialing the dead node 2, then node 2: back to 3 stages with the fault-free weights") {
  TempDir dir;
  auto reference = grow_job({"--out", dir / "one"});
  reference.erase(reference.begin());  // train_ok adds "train"
  train_ok(reference, 120);
  auto nodes = three_nodes(dir, {"--set", "fault.rejoin_timeout_s=1", "--set", "fault.inject=slow:stage=0:ms=15"},
                           "grow-from-one-test");
  nodes[2].kill_at_node0_step = 4;
  nodes[2].restart_after_kill = true;
  nodes[2].restart_when_node0_says = "joined: node 1 taken in";
  // Node 1 joins while node 2's addresses, stale, are still in the store.
  nodes[1].kill_when_node0_says = "replan: node 2 lost for good";
  nodes[1].restart_after_kill = true;
  nodes[1].restart_when_node0_says = "replan: node 1 lost for good";
  const auto results = run_nodes(dir, nodes, 150);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1, joined:\n" << results[1].err);
  INFO("node 2, joined:\n" << results[2].err);
  REQUIRE(results[0].exit_code == 0);
  REQUIRE(results[1].exit_code == 0);
  REQUIRE(results[2].exit_code == 0);
  CHECK(results[0].err.find("replan: node 1 lost for good: 1 replica × 2 stages on nodes 0, 1 -> 1 replica × 1 "
                            "stage on node 0") != std::string::npos);
  CHECK(results[0].err.find("joined: node 1 taken in: 1 replica × 1 stage on node 0 -> 1 replica × 2 stages on "
                            "nodes 0, 1") != std::string::npos);
  const auto run = dir.path() / "run";
  std::vector<std::string> events;
  for (auto& row : read_jsonl(run / "metrics.jsonl")) {
    const std::string e = row.value("event", "");
    if (e == "replan" || e == "joined") events.push_back(e);
  }
  CHECK(events == std::vector<std::string>{"replan", "replan", "joined", "joined"});
  CHECK(progress_line(results[0].err, kSteps).ends_with("  3 nodes, 3 stages live"));
  CHECK(nlohmann::json::parse(read_text(run / "plan.json"))["generation"] == 4);
  CHECK_MESSAGE(read_text(run / "weights.safetensors") == read_text(dir.path() / "one" / "weights.safetensors"),
                "weights differ from the run without the fault");
}
