// Issue 44's shrink, traced: 3 one-stage processes, node 2 killed for good at step 6, nodes 0
// and 1 go on with 2 stages. The trace is read as the run went: schedule.json holds both
// layouts, `trace check` checks every round against the plans of the layout that ran it
// and passes (the round the shrink cut and the records node 2's file never got are said
// once, as notes), and `trace summary` summarises each layout with its own stages.
#include <doctest/doctest.h>
#include <signal.h>

#include <nlohmann/json.hpp>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

TEST_CASE("a traced run that shrank from 3 stages to 2 checks clean and summarises both layouts") {
  constexpr int kSteps = 12;
  TempDir dir;
  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  std::vector<NodeRun> nodes;
  for (int n = 0; n < 3; ++n) {
    auto args = three_stage_job(
        kSteps, {"--set", "fault.rejoin_timeout_s=2", "--set", "trace.enabled=true"});
    args.insert(args.end(), {"--nnodes", "3", "--node-rank", std::to_string(n), "--rdzv", rdzv,
                             "--out", dir / "run"});
    nodes.push_back(NodeRun{args, {{"CONVEYOR_TOKEN", "traced-shrink-test"}}, {}});
  }
  nodes[2].kill_at_node0_step = 6;
  const auto results = run_nodes(dir, nodes, 150);
  INFO("node 0:\n" << results[0].err);
  CHECK(results[2].exit_code == 128 + SIGKILL);
  REQUIRE(results[0].exit_code == 0);
  REQUIRE(results[1].exit_code == 0);
  const auto run = dir.path() / "run";

  const auto plans = nlohmann::json::parse(read_text(run / "trace" / "schedule.json"));
  CHECK(plans["train"]["stages"] == 3);
  CHECK(plans["node_of_actor"] == nlohmann::json::array({0, 1, 2}));
  REQUIRE(plans["relayouts"].size() == 1);
  CHECK(plans["relayouts"][0]["generation"] == 1);
  CHECK(plans["relayouts"][0]["train"]["stages"] == 2);
  CHECK(plans["relayouts"][0]["node_of_actor"] == nlohmann::json::array({0, 1}));

  const auto check = run_conveyor({"trace", "check", run.string(), "--format", "json"});
  INFO("trace check: " << check.out << check.err);
  CHECK(check.exit_code == 0);
  const auto checked = nlohmann::json::parse(check.out);
  CHECK(checked.at("findings").empty());
  CHECK(checked.at("order_checked") == true);
  const std::string notes = checked.at("notes").dump();
  CHECK(notes.find("layout generation 1 (2 stage actors; from step") != std::string::npos);
  CHECK(notes.find("after node 2 was lost for good") != std::string::npos);

  const auto summary = run_conveyor({"trace", "summary", run.string()});
  INFO("trace summary: " << summary.out << summary.err);
  REQUIRE(summary.exit_code == 0);
  CHECK(summary.out.find("layout generation 0: 3 stage actors, the layout the run started with") !=
        std::string::npos);
  CHECK(summary.out.find("layout generation 1: 2 stage actors, from step") != std::string::npos);

  const auto svg = dir.path() / "last.svg";
  const auto drawn = run_conveyor({"trace", "draw", run.string(), "--out", svg.string()});
  INFO("trace draw: " << drawn.err);
  REQUIRE(drawn.exit_code == 0);
  CHECK(drawn.err.find("layout generation 1, 2 stage actors") != std::string::npos);
}
