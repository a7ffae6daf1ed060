// Issue 44 item 6, a second fault during the replan (actors/coordinator/coordinator_relayout.cpp,
// abandon_move): 4 processes of one CPU stage each; node 3 is killed for good at a random
// step (the seed is printed), and node 2 dies inside the resulting shrink's move onto
// nodes 0, 1, 2 (a move takes ~20 ms, which no kill from outside can aim at, hence
// fault.inject): as its directory receives the move (`exit:node=2:when=relayout`: before
// the new actors took over), or as its new stage is told to restore its state
// (`exit:node=2:when=restore`: after they took over). Either way the move is abandoned,
// and at node 2's own rejoin deadline the job shrinks again from node 0's store (the
// 4-stage layout's states of step S, or the 3-stage layout's cut of them) onto nodes 0
// and 1, ending with the weights of the run without the faults, bit for bit. The record:
// one replan row (the void move never ran a step: the row goes from the layout the
// coordinator held to the 2-stage one), the log line of the abandoned move, plan.json at
// generation 2 (the void move took generation 1).
// Also: nodes 2 and 3 lost at once (the second inside the first's rejoin wait: one shrink
// at the first deadline), and a grow interrupted (3 nodes: node 2 killed, started again
// after the shrink, and lost again as the grow's move reaches it: the job moves again at
// once onto nodes 0 and 1, since the other nodes' records are the void move's).
#include <doctest/doctest.h>
#include <signal.h>

#include <string>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

constexpr int kSteps = 24;

// tiny_job on 4 stages (one per node of 4), `kSteps` steps, then `extra`.
std::vector<std::string> four_stage_job(const std::vector<std::string>& extra = {}) {
  auto args = tiny_job({"--set", "train.steps=" + std::to_string(kSteps), "--set", "rendezvous.timeout_s=20"});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

struct SecondFault {
  KillStep kill;
  std::vector<NodeResult> results;
  nlohmann::json replan, recovery;
  double seconds = 0;
};

// Runs the 4-node job with `inject` (node 2's exit), node 3 killed at a random step; checks
// what both cases share and returns the rows.
SecondFault run_second_fault(const TempDir& dir, const std::string& inject) {
  SecondFault out{random_kill_step(3, kSteps - 8), {}, {}, {}, 0};
  auto nodes = job_on_nodes(4,
                            four_stage_job({"--set", "fault.rejoin_timeout_s=2", "--set",
                                            "fault.inject=[" + inject + "]"}),
                            dir / "run", "second-fault-test");
  nodes[3].kill_at_node0_step = out.kill.step;
  const auto start = std::chrono::steady_clock::now();
  out.results = run_nodes(dir, nodes, 150);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto& results = out.results;
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  INFO("node 2:\n" << results[2].err);
  CHECK(results[3].exit_code == 128 + SIGKILL);
  CHECK(results[2].exit_code == 128 + SIGKILL);
  REQUIRE(results[0].exit_code == 0);
  REQUIRE(results[1].exit_code == 0);
  CHECK(results[0].err.find("replan: the move onto nodes [0, 1, 2] (layout generation 1) is abandoned") !=
        std::string::npos);
  CHECK(results[0].err.find("replan: node 2 lost for good") != std::string::npos);
  CHECK(progress_line(results[0].err, kSteps).ends_with("  2 nodes, 2 stages live"));
  CHECK(results[1].err.find("node 1 moves onto 1 replica × 2 stages (layout generation 2)") != std::string::npos);

  std::vector<nlohmann::json> replans, recoveries;
  for (auto& row : read_jsonl(dir.path() / "run" / "metrics.jsonl")) {
    if (row.value("event", "") == "replan") replans.push_back(row);
    if (row.value("event", "") == "recovery") recoveries.push_back(row);
  }
  REQUIRE(replans.size() == 1);
  REQUIRE(recoveries.size() == 1);
  out.replan = replans[0];
  out.recovery = recoveries[0];
  const auto& r = out.replan;
  CHECK(r["lost_node"] == 2);
  CHECK(r["to"]["stages"] == 2);
  CHECK(r["to"]["nodes"] == nlohmann::json::array({0, 1}));
  CHECK(r["restored_from"] == "buddy copies");
  CHECK(r["steps_redone"].get<int>() >= 0);
  // Both rejoin timeouts (2 s each) passed before the job moved for good.
  CHECK(r["ms"].get<double>() > 4000);
  CHECK(out.recovery["fault"] == "node");
  CHECK(out.recovery["stages"] == nlohmann::json::array({3, 2}));
  MESSAGE(inject << ", node 3 killed at step " << out.kill.step << ": " << r.dump() << "; the whole job took "
                 << out.seconds << " s");

  const auto plan = nlohmann::json::parse(read_text(dir.path() / "run" / "plan.json"));
  CHECK(plan["generation"] == 2);
  return out;
}

}  // namespace

TEST_CASE("4 one-stage nodes, node 3 lost for good and node 2 lost as the shrink's move reaches it: the move is abandoned, and nodes 0 and 1 end on 2 stages with the fault-free weights bit for bit") {
  TempDir dir;
  const std::string& want = one_process_weights(dir, four_stage_job());
  const auto run = run_second_fault(dir, "exit:node=2:when=relayout");
  CHECK(run.results[2].err.find("node 2: fault.inject exit: this process dies as it moves onto the layout of "
                                "nodes [0, 1, 2] (layout generation 1)") != std::string::npos);
  // The coordinator still held the 4-stage layout: the shrink goes from it.
  CHECK(run.replan["from"]["stages"] == 4);
  CHECK(run.replan["from"]["nodes"] == nlohmann::json::array({0, 1, 2, 3}));
  CHECK(run.results[0].err.find("the job stays on the layout before it until it moves again: at node 2's rejoin deadline") !=
        std::string::npos);
  const std::string got = read_text(dir.path() / "run" / "weights.safetensors");
  REQUIRE(got.size() == want.size());
  CHECK_MESSAGE(got == want, "weights differ from the run without the faults (seed " << run.kill.seed << ")");
}

TEST_CASE("4 one-stage nodes, node 3 lost for good and node 2 lost as its new stage restores: the move is abandoned after it took over, and nodes 0 and 1 end on 2 stages with the fault-free weights bit for bit") {
  TempDir dir;
  const std::string& want = one_process_weights(dir, four_stage_job());
  const auto run = run_second_fault(dir, "exit:node=2:when=restore");
  CHECK(run.results[2].err.find("fault.inject exit: this process dies as the stage is told to restore node 0's "
                                "copy of its state") != std::string::npos);
  // The coordinator held the 3-stage layout (its actors not all restored): the shrink goes
  // from its cut states.
  CHECK(run.replan["from"]["stages"] == 3);
  CHECK(run.replan["from"]["nodes"] == nlohmann::json::array({0, 1, 2}));
  CHECK(run.results[0].err.find("the job holds that layout") != std::string::npos);
  const std::string got = read_text(dir.path() / "run" / "weights.safetensors");
  REQUIRE(got.size() == want.size());
  CHECK_MESSAGE(got == want, "weights differ from the run without the faults (seed " << run.kill.seed << ")");
}

TEST_CASE("4 one-stage nodes, nodes 2 and 3 lost at once (the second during the first's rejoin wait): the job shrinks once onto nodes 0 and 1 and ends with the fault-free weights bit for bit") {
  TempDir dir;
  const std::string& want = one_process_weights(dir, four_stage_job());
  const KillStep kill = random_kill_step(3, kSteps - 8);
  auto nodes = job_on_nodes(4, four_stage_job({"--set", "fault.rejoin_timeout_s=2"}), dir / "run",
                            "two-down-test");
  nodes[2].kill_at_node0_step = kill.step;
  nodes[3].kill_at_node0_step = kill.step;
  const auto results = run_nodes(dir, nodes, 150);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  CHECK(results[2].exit_code == 128 + SIGKILL);
  CHECK(results[3].exit_code == 128 + SIGKILL);
  REQUIRE(results[0].exit_code == 0);
  REQUIRE(results[1].exit_code == 0);
  // The first deadline gives up on both: the shrink goes onto the nodes present, and the
  // other node's deadline (of a recovery that ended) is ignored.
  std::vector<nlohmann::json> replans;
  for (auto& row : read_jsonl(dir.path() / "run" / "metrics.jsonl"))
    if (row.value("event", "") == "replan") replans.push_back(row);
  REQUIRE(replans.size() == 1);
  const auto& r = replans[0];
  CHECK((r["lost_node"] == 2 || r["lost_node"] == 3));
  CHECK(r["from"]["stages"] == 4);
  CHECK(r["to"]["stages"] == 2);
  CHECK(r["to"]["nodes"] == nlohmann::json::array({0, 1}));
  MESSAGE("nodes 2 and 3 killed at step " << kill.step << ": " << r.dump());
  CHECK(nlohmann::json::parse(read_text(dir.path() / "run" / "plan.json"))["generation"] == 1);
  check_final_weights(want, dir.path() / "run", kill.seed);
}

TEST_CASE("a grow interrupted: node 2 killed for good, started again after the shrink, and lost again as the grow's move reaches it: the job moves again onto nodes 0 and 1 and ends with the fault-free weights bit for bit") {
  // 3 one-stage nodes, stage 0 slowed (timing only) so that the shrunk job still runs when
  // node 2's new process has joined. The new process is a first attempt, so the injected
  // exit fires in it at the grow's move (the first it receives); the killed one never saw
  // a move.
  constexpr int kGrowSteps = 48;
  const KillStep kill = random_kill_step(3, 12);
  TempDir dir;
  const std::string& want = one_process_weights(dir, three_stage_job(kGrowSteps));
  auto nodes = job_on_nodes(3,
                            three_stage_job(kGrowSteps, {"--set", "fault.rejoin_timeout_s=2", "--set",
                                                         "fault.inject=[slow:stage=0:ms=15,exit:node=2:when=relayout]"}),
                            dir / "run", "grow-interrupted-test");
  restart_after_shrink(nodes[2], 2, kill.step);
  const auto results = run_nodes(dir, nodes, 150);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  INFO("node 2, joined:\n" << results[2].err);
  CHECK(results[2].killed_exit_code == 128 + SIGKILL);
  CHECK(results[2].exit_code == 128 + SIGKILL);  // the new process, by its injected exit
  CHECK(results[2].err.find("node 2: fault.inject exit: this process dies as it moves onto the layout of nodes "
                            "[0, 1, 2] (layout generation 2)") != std::string::npos);
  REQUIRE(results[0].exit_code == 0);
  REQUIRE(results[1].exit_code == 0);
  CHECK(results[0].err.find("replan: the move onto nodes [0, 1, 2] (layout generation 2) is abandoned") !=
        std::string::npos);
  CHECK(progress_line(results[0].err, kGrowSteps).ends_with("  2 nodes, 2 stages live"));

  // The shrink's row, no joined row (the grow never happened), and the row of the move
  // again onto the nodes the job ran on (the nodes' records were the void move's).
  std::vector<nlohmann::json> replans;
  for (auto& row : read_jsonl(dir.path() / "run" / "metrics.jsonl")) {
    CHECK(row.value("event", "") != "joined");
    if (row.value("event", "") == "replan") replans.push_back(row);
  }
  REQUIRE(replans.size() == 2);
  CHECK(replans[1]["lost_node"] == 2);
  CHECK(replans[1]["from"]["nodes"] == nlohmann::json::array({0, 1}));
  CHECK(replans[1]["to"]["nodes"] == nlohmann::json::array({0, 1}));
  CHECK(replans[1]["steps_redone"] == 0);
  MESSAGE("kill at step " << kill.step << ": " << replans[0].dump() << "; " << replans[1].dump());
  CHECK(nlohmann::json::parse(read_text(dir.path() / "run" / "plan.json"))["generation"] == 3);
  check_final_weights(want, dir.path() / "run", kill.seed);
}

TEST_CASE("a grow interrupted by a node of the shrunk layout: node 2 killed for good and started again after the shrink, node 1 lost as the grow's move reaches it: the joined node is told it was not taken in, and node 0 ends alone with the fault-free weights bit for bit") {
  // 3 one-stage nodes as above; node 1 dies at its second move (the shrink's was its
  // first): the grow's, before its actors took over.
  constexpr int kGrowSteps = 48;
  const KillStep kill = random_kill_step(3, 12);
  TempDir dir;
  const std::string& want = one_process_weights(dir, three_stage_job(kGrowSteps));
  auto nodes = job_on_nodes(
      3,
      three_stage_job(kGrowSteps, {"--set", "fault.rejoin_timeout_s=2", "--set",
                                   "fault.inject=[slow:stage=0:ms=15,exit:node=1:when=relayout:nth=2]"}),
      dir / "run", "grow-interrupted-by-node-1-test");
  restart_after_shrink(nodes[2], 2, kill.step);
  const auto results = run_nodes(dir, nodes, 150);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  INFO("node 2, joined:\n" << results[2].err);
  CHECK(results[2].killed_exit_code == 128 + SIGKILL);
  CHECK(results[1].exit_code == 128 + SIGKILL);
  CHECK(results[1].err.find("node 1: fault.inject exit: this process dies as it moves onto the layout of nodes "
                            "[0, 1, 2] (layout generation 2)") != std::string::npos);
  // The joined process is told why it was not taken in, and fails.
  CHECK(results[2].exit_code != 0);
  CHECK(results[2].exit_code != 128 + SIGKILL);
  CHECK(results[2].err.find("the job did not take this node in: node 1 was lost while the job grew onto nodes "
                            "[0, 1, 2]") != std::string::npos);
  REQUIRE(results[0].exit_code == 0);
  CHECK(results[0].err.find("replan: the move onto nodes [0, 1, 2] (layout generation 2) is abandoned") !=
        std::string::npos);
  CHECK(progress_line(results[0].err, kGrowSteps).ends_with("  1 node, 1 stage live"));

  std::vector<nlohmann::json> replans;
  for (auto& row : read_jsonl(dir.path() / "run" / "metrics.jsonl")) {
    CHECK(row.value("event", "") != "joined");
    if (row.value("event", "") == "replan") replans.push_back(row);
  }
  REQUIRE(replans.size() == 2);
  CHECK(replans[1]["lost_node"] == 1);
  CHECK(replans[1]["from"]["nodes"] == nlohmann::json::array({0, 1}));
  CHECK(replans[1]["to"]["nodes"] == nlohmann::json::array({0}));
  CHECK(replans[1]["to"]["stages"] == 1);
  MESSAGE("kill at step " << kill.step << ": " << replans[0].dump() << "; " << replans[1].dump());
  CHECK(nlohmann::json::parse(read_text(dir.path() / "run" / "plan.json"))["generation"] == 3);
  check_final_weights(want, dir.path() / "run", kill.seed);
}
