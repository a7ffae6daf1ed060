// Issue 44's grow (actors/coordinator/coordinator_grow.cpp): 3 processes of one CPU stage
// each; node 2 is killed for good at a random step (the seed is printed) and, once the job
// shrank onto nodes 0 and 1, a new process is started for node 2 with the same command.
// It joins, and at the next step boundary the job goes back to 3 stages, the state cut
// in memory from node 0's snapshots of that boundary; the run ends with the weights of the
// run without the fault, bit for bit. The joined row, the log lines and plan.json's
// generation say so. With fault.grow never the new process is refused and exits naming
// the key, while the job ends on 2 stages. A node taken in and lost again shrinks the job
// a second time. With fault.grow at_checkpoint the node is taken in at the next checkpoint
// boundary, and each checkpoint holds and says the layout it was taken in.
#include <doctest/doctest.h>
#include <signal.h>

#include <string>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

// Enough steps that the shrunk job still runs when the new process has joined: stage 0's
// compute actions sleep a little (fault.inject slow: timing only, the numbers are the same).
constexpr int kSteps = 48;

std::vector<std::string> grow_job(const std::vector<std::string>& extra) { return three_stage_job(kSteps, extra); }

// The job without faults in one process, into dir/one: the weights and losses to match.
void run_reference(const TempDir& dir) {
  auto reference = grow_job({"--out", dir / "one"});
  reference.erase(reference.begin());  // train_ok adds "train"
  train_ok(reference, 120);
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

}  // namespace

TEST_CASE("3 one-stage nodes, node 2 killed for good and started again after the shrink: the job grows back to 3 stages and ends with the fault-free weights bit for bit") {
  const KillStep kill = random_kill_step(3, 12);

  TempDir dir;
  run_reference(dir);

  auto nodes = three_nodes(dir, {"--set", "fault.rejoin_timeout_s=2", "--set", "fault.inject=slow:stage=0:ms=15"},
                           "grow-test");
  restart_after_shrink(nodes[2], 2, kill.step);
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
  const auto replans = event_rows(run, "replan");
  REQUIRE(replans.size() == 1);
  CHECK(replans[0]["lost_node"] == 2);
  CHECK(replans[0]["to"]["stages"] == 2);
  const auto joins = event_rows(run, "joined");
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
  MESSAGE("kill at step " << kill.step << ": " << replans[0].dump() << "; " << j.dump());

  check_losses_match(run, dir.path() / "one", kSteps);

  const auto plan = nlohmann::json::parse(read_text(run / "plan.json"));
  CHECK(plan["generation"] == 2);

  const std::string want = read_text(dir.path() / "one" / "weights.safetensors");
  const std::string got = read_text(run / "weights.safetensors");
  REQUIRE(got.size() == want.size());
  CHECK_MESSAGE(got == want, "weights differ from the run without the fault (seed " << kill.seed << ")");
}

TEST_CASE("with fault.grow at_checkpoint a node that joins the shrunk job is taken in at the next checkpoint boundary, and every checkpoint says and holds its layout") {
  const KillStep kill = random_kill_step(3, 12);
  constexpr int kEvery = 6;

  TempDir dir;
  run_reference(dir);

  auto nodes = three_nodes(dir,
                           {"--set", "fault.rejoin_timeout_s=2", "--set", "fault.inject=slow:stage=0:ms=15", "--set",
                            "fault.grow=at_checkpoint", "--set", "checkpoint.every=" + std::to_string(kEvery), "--set",
                            "checkpoint.keep=20"},
                           "grow-at-checkpoint-test");
  restart_after_shrink(nodes[2], 2, kill.step);
  const auto results = run_nodes(dir, nodes, 150);
  INFO("node 0:\n" << results[0].err);
  INFO("node 2, joined:\n" << results[2].err);
  REQUIRE(results[0].exit_code == 0);
  REQUIRE(results[1].exit_code == 0);
  REQUIRE(results[2].exit_code == 0);
  CHECK(results[0].err.find("node 2 joined the shrunk job: it is taken in at the next checkpoint boundary "
                            "(fault.grow at_checkpoint)") != std::string::npos);

  const auto run = dir.path() / "run";
  REQUIRE(event_rows(run, "replan").size() == 1);
  REQUIRE(event_rows(run, "joined").size() == 1);
  const int shrunk_at = boundary_of_event(run, "replan");  // the step it failed at, before the replay
  const int grown_at = boundary_of_event(run, "joined");
  MESSAGE("kill at step " << kill.step << ": shrunk after step " << shrunk_at << ", grown after step " << grown_at
                          << ": " << event_rows(run, "joined")[0].dump());
  CHECK(grown_at % kEvery == 0);
  CHECK(grown_at >= shrunk_at);

  // The checkpoint at the grow's boundary was taken before it, on 2 stages; those after it
  // on 3; each verifies and its manifest says the layout of its shards.
  const auto checkpoints = verified_checkpoints(run);
  const auto joined = event_rows(run, "joined")[0];
  CHECK(checkpoints.size() == static_cast<std::size_t>(kSteps / kEvery));
  for (const auto& [step, m] : checkpoints) {
    INFO("checkpoint of step " << step);
    CHECK(m.shards.size() == static_cast<std::size_t>(m.stages));
    if (step == grown_at) {
      CHECK(m.stages == 2);
      CHECK(m.partition_halves == partition_halves(joined["from"]["partition"]));
    }
    if (step > grown_at) {
      CHECK(m.stages == 3);
      CHECK(m.partition_halves == partition_halves(joined["to"]["partition"]));
    }
  }
  REQUIRE(checkpoints.count(grown_at) == 1);

  check_losses_match(run, dir.path() / "one", kSteps);
  const std::string want = read_text(dir.path() / "one" / "weights.safetensors");
  CHECK_MESSAGE(read_text(run / "weights.safetensors") == want,
                "weights differ from the run without the fault (seed " << kill.seed << ")");
  // The shrunk layout's checkpoint resumes on the configured 3 stages in one process.
  const auto shrunk_checkpoint = run / "checkpoints" / conveyor::checkpoint::step_dir_name(grown_at);
  CHECK_MESSAGE(resumed_in_one_process(dir, grow_job({}), shrunk_checkpoint.string()) == want,
                "the resume from " << shrunk_checkpoint.string() << " ends with other weights (seed " << kill.seed << ")");
}

TEST_CASE("with fault.grow never a node that joins the shrunk job is refused naming the key, and the job ends on 2 stages") {
  TempDir dir;
  auto nodes = three_nodes(dir,
                           {"--set", "fault.rejoin_timeout_s=2", "--set", "fault.grow=never", "--set",
                            "fault.inject=slow:stage=0:ms=15"},
                           "grow-never-test");
  restart_after_shrink(nodes[2], 2, 4);
  const auto results = run_nodes(dir, nodes, 150);
  INFO("node 0:\n" << results[0].err);
  INFO("node 2, joined:\n" << results[2].err);
  REQUIRE(results[0].exit_code == 0);
  REQUIRE(results[1].exit_code == 0);
  CHECK(results[2].exit_code != 0);
  CHECK(results[2].err.find("node 2 joined a job that shrank without it, but the job takes no node back: "
                            "fault.grow is never") != std::string::npos);
  CHECK(results[0].err.find("the job takes no node back: fault.grow is never") != std::string::npos);
  CHECK(event_rows(dir.path() / "run", "joined").empty());
  const auto plan = nlohmann::json::parse(read_text(dir.path() / "run" / "plan.json"));
  CHECK(plan["generation"] == 1);
}

TEST_CASE("a node taken in and lost again: the job shrinks a second time (generation 3) and still ends with the fault-free weights") {
  TempDir dir;
  run_reference(dir);
  auto nodes = three_nodes(dir, {"--set", "fault.rejoin_timeout_s=2", "--set", "fault.inject=slow:stage=0:ms=15"},
                           "grow-twice-test");
  restart_after_shrink(nodes[2], 2, 5);
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
  run_reference(dir);
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
