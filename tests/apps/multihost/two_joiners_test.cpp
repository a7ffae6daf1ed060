// Issue 44's grow with two processes joining at once: 3 processes of one CPU stage each;
// node 2 is killed for good at a random step (the seed is printed; CONVEYOR_TEST_SEED
// replays it), node 1 as soon as the job shrank without node 2, so the job runs on node 0
// alone; then both are started again in the same poll of the harness (microseconds
// apart), before either is taken in. Each finds the same `layout/nodes` ("0") in the
// store, and the other's address there may still be its dead forerunner's, so neither can
// count on reaching the other by itself: node 0's directory, which takes both joins,
// connects each joiner to the other (PeerRejoined both ways, node_directory.cpp). Both are
// taken in at one step boundary (one `joined` row naming both) or at two consecutive
// grows, and the job ends on 3 stages with the weights of the run without faults.
#include <doctest/doctest.h>
#include <signal.h>

#include <string>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

// Stage 0 sleeps 40 ms in each compute action (timing only): steps of node 0 alone last
// long enough that the two joins, started together, usually reach the same boundary.
constexpr int kSteps = 40;

std::vector<std::string> job(const std::vector<std::string>& extra) { return three_stage_job(kSteps, extra); }

}  // namespace

TEST_CASE("nodes 2 and 1 lost for good, then both started again at once before either is taken in: both are taken in and the job ends on 3 stages with the fault-free weights bit for bit") {
  const KillStep kill = random_kill_step(2, 6);
  TempDir dir;
  auto reference = job({"--out", dir / "one"});
  reference.erase(reference.begin());  // train_ok adds "train"
  train_ok(reference, 120);

  auto nodes = job_on_nodes(3, job({"--set", "fault.rejoin_timeout_s=2", "--set", "fault.inject=slow:stage=0:ms=40"}),
                            dir / "run", "two-joiners-test");
  nodes[2].kill_at_node0_step = kill.step;
  nodes[2].restart_after_kill = true;
  nodes[1].kill_when_node0_says = "replan: node 2 lost for good";
  nodes[1].restart_after_kill = true;
  // The same text for both: the harness starts them in one pass of its loop.
  for (int n : {1, 2}) nodes[n].restart_when_node0_says = "replan: node 1 lost for good";
  const auto results = run_nodes(dir, nodes, 150);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1, joined:\n" << results[1].err);
  INFO("node 2, joined:\n" << results[2].err);
  REQUIRE(results[0].exit_code == 0);
  REQUIRE(results[1].exit_code == 0);
  REQUIRE(results[2].exit_code == 0);
  CHECK(results[0].err.find("replan: node 1 lost for good: 1 replica × 2 stages on nodes 0, 1 -> 1 replica × 1 "
                            "stage on node 0") != std::string::npos);
  // Both joined before either was taken in: node 0 heard of both joins while on 1 stage.
  const auto shrunk_to_one = results[0].err.find("replan: node 1 lost for good");
  const auto first_grow = results[0].err.find("joined: node");
  REQUIRE(first_grow != std::string::npos);
  for (int n : {1, 2}) {
    const auto heard = results[0].err.find("node " + std::to_string(n) + " joined the shrunk job", shrunk_to_one);
    CHECK_MESSAGE(heard < first_grow, "node " << n << "'s join was not heard before the first grow");
  }

  const auto run = dir.path() / "run";
  const auto joins = event_rows(run, "joined");
  REQUIRE((joins.size() == 1 || joins.size() == 2));
  MESSAGE("seed " << kill.seed << ", kill at step " << kill.step << ": " << joins.size() << " joined row(s): "
                  << joins.front().dump() << (joins.size() == 2 ? "; " + joins[1].dump() : std::string()));
  if (joins.size() == 1) {  // one boundary seated both: one row naming both
    CHECK(joins[0]["nodes"] == nlohmann::json::array({1, 2}));
    CHECK(joins[0]["from"]["nodes"] == nlohmann::json::array({0}));
    CHECK(joins[0]["to"]["nodes"] == nlohmann::json::array({0, 1, 2}));
    CHECK(results[0].err.find("joined: nodes 1, 2 taken in: 1 replica × 1 stage on node 0 -> 1 replica × 3 stages "
                              "on nodes 0, 1, 2") != std::string::npos);
  } else {  // consecutive grows, one node each
    CHECK(joins[0]["from"]["nodes"] == nlohmann::json::array({0}));
    CHECK(joins[0]["to"]["stages"] == 2);
    CHECK(joins[1]["to"]["nodes"] == nlohmann::json::array({0, 1, 2}));
    CHECK(joins[0]["node"] != joins[1]["node"]);
  }
  for (const auto& j : joins) {
    CHECK(j["steps_redone"] == 0);
    CHECK(j["ms"].get<double>() > 0);
  }
  CHECK(progress_line(results[0].err, kSteps).ends_with("  3 nodes, 3 stages live"));
  CHECK(nlohmann::json::parse(read_text(run / "plan.json"))["generation"] == 2 + static_cast<int>(joins.size()));
  check_losses_match(run, dir.path() / "one", kSteps);
  CHECK_MESSAGE(read_text(run / "weights.safetensors") == read_text(dir.path() / "one" / "weights.safetensors"),
                "weights differ from the run without the faults (seed " << kill.seed << ")");
}
