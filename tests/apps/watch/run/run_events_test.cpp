// What the live page lists from a run folder's event rows (run_events.hpp): the newest
// text sample, recovery events in order with a line for people, and the nodes and stages
// alive through a node's loss and its return.
#include <doctest/doctest.h>

#include "apps/watch/run_folder.hpp"
#include "apps/watch/status_json.hpp"
#include "tests/apps/train/train_test_support.hpp"
#include "tests/apps/watch/run/run_fixture.hpp"
#include "tests/support/temp_dir.hpp"

using namespace conveyor::watch;
using conveyor::testing::RunFixture;
using conveyor::testing::TempDir;

TEST_CASE("the newest sample row is the run's latest text sample") {
  TempDir dir;
  RunFixture run(dir.path());
  RunFolder folder(dir.path());
  folder.refresh();
  CHECK_FALSE(folder.status().last_sample);
  CHECK(status_json(folder.status()).at("sample").is_null());
  run.step(0);
  run.event({{"event", "sample"}, {"step", 0}, {"text", "first"}});
  run.event({{"event", "sample"}, {"step", 4}, {"text", "the <b>second</b>\n\"text\""}, {"prompt", "The"}});
  folder.refresh();
  const auto& s = folder.status();
  REQUIRE(s.last_sample);
  CHECK(s.last_sample->step == 4);
  CHECK(s.last_sample->text == "the <b>second</b>\n\"text\"");  // as written: the page sets it as text
  CHECK(s.unknown_rows == 0);
  const auto j = status_json(s);
  CHECK(j.at("sample").at("text") == "the <b>second</b>\n\"text\"");
  CHECK(j.at("sample").at("prompt") == "The");
}

TEST_CASE("a sample longer than the bound is cut, so one row cannot grow every event") {
  TempDir dir;
  RunFixture run(dir.path());
  run.event({{"event", "sample"}, {"step", 1}, {"text", std::string(RunStatus::kMaxSampleBytes + 100, 'x')}});
  RunFolder folder(dir.path());
  folder.refresh();
  REQUIRE(folder.status().last_sample);
  CHECK(folder.status().last_sample->text.size() == RunStatus::kMaxSampleBytes);
}

TEST_CASE("recovery, node loss, replan and joined rows are listed in order, and nodes come back") {
  TempDir dir;
  RunFixture run(dir.path());
  // Two nodes: stages 2 and 3 on node 1, as plan.json of a two-process job says.
  auto plan = nlohmann::json::parse(conveyor::testing::read_text(dir.path() / "plan.json"));
  for (auto& replica : plan.at("replicas"))
    for (auto& actor : replica.at("stages")) actor["node"] = actor.at("stage").get<int>() >= 2 ? 1 : 0;
  conveyor::write_file_atomically(dir.path() / "plan.json", plan.dump());
  run.step(0);
  run.crash(1);
  run.node_lost(1);
  RunFolder folder(dir.path());
  folder.refresh();
  {
    const auto& s = folder.status();
    REQUIRE(s.recent_events.size() == 2);
    CHECK(s.recent_events[0].kind == "recovery: crash");
    CHECK(s.recent_events[0].step == 1);
    CHECK(s.recent_events[0].detail.find("stage(s) 2 back at step 0 in 12 ms") != std::string::npos);
    CHECK(s.recent_events[1].kind == "node_lost");
    CHECK(s.recent_events[1].detail == "node 1: node 1 stopped answering");
    CHECK(s.nodes() == std::vector<int>{0, 1});
    CHECK(s.stages_alive() == 2);
    const auto j = status_json(s);
    CHECK(j.at("nodes") == nlohmann::json::parse(R"([{"node":0,"alive":true},{"node":1,"alive":false}])"));
    CHECK(j.at("stages_alive") == 2);
  }
  run.event({{"event", "replan"},
             {"lost_node", 1},
             {"from", {{"replicas", 1}, {"stages", 4}, {"nodes", {0, 1}}}},
             {"to", {{"replicas", 1}, {"stages", 2}, {"nodes", {0}}}},
             {"restored_from", "buddy copies"},
             {"steps_redone", 1},
             {"ms", 412.5}});
  run.event({{"event", "rejoin"}, {"node", 1}, {"step", 7}});
  run.event({{"event", "joined"},
             {"node", 1},
             {"from", {{"replicas", 1}, {"stages", 2}, {"nodes", {0}}}},
             {"to", {{"replicas", 1}, {"stages", 4}, {"nodes", {0, 1}}}},
             {"restored_from", "snapshot"},
             {"steps_redone", 0},
             {"ms", 95.5}});
  folder.refresh();
  const auto& s = folder.status();
  REQUIRE(s.recent_events.size() == 5);
  CHECK(s.recent_events[4].kind == "joined");
  CHECK(s.recent_events[4].detail ==
        "node 1 joined: 2 stage(s) × 1 replica(s) on node(s) 0 → 4 stage(s) × 1 replica(s) on node(s) 0, 1; "
        "state from snapshot");
  CHECK(s.recent_events[2].kind == "replan");
  CHECK(s.recent_events[2].detail ==
        "node 1 given up on: 4 stage(s) × 1 replica(s) on node(s) 0, 1 → 2 stage(s) × 1 replica(s) on node(s) 0; "
        "state from buddy copies");
  CHECK(s.recent_events[3].kind == "rejoin");
  CHECK(s.recent_events[3].step == 7);
  CHECK(s.recent_events[3].detail == R"({"node":1})");
  CHECK(s.nodes_down.empty());
  CHECK(s.stages_alive() == 4);
  CHECK(s.unknown_rows == 0);
  CHECK(s.recoveries.at("crash") == 1);  // the counters still count
}

TEST_CASE("a joined row that took in two nodes at one boundary names both") {
  TempDir dir;
  RunFixture run(dir.path());
  run.step(0);
  run.event({{"event", "joined"},
             {"node", 2},
             {"nodes", {1, 2}},
             {"from", {{"replicas", 1}, {"stages", 1}, {"nodes", {0}}}},
             {"to", {{"replicas", 1}, {"stages", 3}, {"nodes", {0, 1, 2}}}},
             {"restored_from", "snapshot"},
             {"steps_redone", 0},
             {"ms", 95.5}});
  RunFolder folder(dir.path());
  folder.refresh();
  const auto& s = folder.status();
  REQUIRE(!s.recent_events.empty());
  CHECK(s.recent_events.back().kind == "joined");
  CHECK(s.recent_events.back().detail ==
        "nodes 1, 2 joined: 1 stage(s) × 1 replica(s) on node(s) 0 → 3 stage(s) × 1 replica(s) on node(s) 0, 1, 2; "
        "state from snapshot");
}
