// The replan row of metrics.jsonl and its log line (actors/plan/replan_event.hpp): exactly
// the fields issue 44 names, in both forms (a node lost for good, a node joined).
#include <doctest/doctest.h>

#include <set>

#include "actors/plan/replan_event.hpp"

using namespace conveyor;

namespace {

std::set<std::string> keys_of(const nlohmann::json& row) {
  std::set<std::string> out;
  for (const auto& [key, value] : row.items()) out.insert(key);
  return out;
}

ReplanEvent shrink_event() {
  ReplanEvent e;
  e.cause = ReplanEvent::Cause::lost;
  e.node = 2;
  e.from = {1, 3, {0, 1, 2}, {4, 2, 2}};
  e.to = {1, 2, {0, 1}, {5, 3}};
  e.restored_from = RestoreOrigin::buddy_copies;
  e.steps_redone = 1;
  e.ms = 412.5;
  e.phases_ms = {400.0, 2.5, 6.0, 4.0};
  return e;
}

}  // namespace

TEST_CASE("a shrink's replan row has exactly lost_node, from, to, restored_from, steps_redone, ms and its phases") {
  const auto row = replan_row(shrink_event());
  CHECK(keys_of(row) == std::set<std::string>{"event", "lost_node", "from", "to", "restored_from", "steps_redone", "ms",
                                              "phases_ms"});
  CHECK(row["event"] == "replan");
  CHECK(row["lost_node"] == 2);
  CHECK(row["from"] == nlohmann::json::parse(R"({"replicas":1,"stages":3,"nodes":[0,1,2],"partition":[2,1,1]})"));
  // Half blocks are written as blocks: 2.5 and 1.5.
  CHECK(row["to"] == nlohmann::json::parse(R"({"replicas":1,"stages":2,"nodes":[0,1],"partition":[2.5,1.5]})"));
  CHECK(row["restored_from"] == "buddy copies");
  CHECK(row["steps_redone"] == 1);
  CHECK(row["ms"] == 412.5);
  CHECK(row["phases_ms"] == nlohmann::json{{"wait", 400.0}, {"cut", 2.5}, {"spawn", 6.0}, {"restore", 4.0}});
  CHECK(row.dump().find('\n') == std::string::npos);  // one line of metrics.jsonl
}

TEST_CASE("a grow's row is a joined event naming the node, with the replan row's other fields") {
  ReplanEvent e = shrink_event();
  e.cause = ReplanEvent::Cause::joined;
  e.node = 3;
  std::swap(e.from, e.to);
  e.restored_from = RestoreOrigin::snapshot;
  e.steps_redone = 0;
  const auto row = replan_row(e);
  CHECK(keys_of(row) == std::set<std::string>{"event", "node", "nodes", "from", "to", "restored_from", "steps_redone",
                                              "ms", "phases_ms"});
  CHECK(row["event"] == "joined");
  CHECK(row["node"] == 3);
  CHECK(row["nodes"] == nlohmann::json::array({3}));
  CHECK(row["from"]["stages"] == 2);
  CHECK(row["to"]["stages"] == 3);
  CHECK(row["to"]["nodes"] == nlohmann::json::array({0, 1, 2}));
  CHECK(row["restored_from"] == "snapshot");
  CHECK(row["steps_redone"] == 0);
  CHECK(restore_origin_name(RestoreOrigin::checkpoint) == "checkpoint");
}

TEST_CASE("a grow's log line says which node was taken in, both layouts and the time") {
  ReplanEvent e = shrink_event();
  e.cause = ReplanEvent::Cause::joined;
  std::swap(e.from, e.to);
  e.restored_from = RestoreOrigin::snapshot;
  e.steps_redone = 0;
  e.ms = 95.125;
  CHECK(replan_log_line(e) ==
        "joined: node 2 taken in: 1 replica × 2 stages on nodes 0, 1 -> 1 replica × 3 stages on nodes 0, 1, 2, "
        "restored from snapshot, 0 steps redone, 95.1 ms");
}

TEST_CASE("a grow that took in two nodes at one boundary names both in its row and its log line") {
  ReplanEvent e = shrink_event();
  e.cause = ReplanEvent::Cause::joined;
  e.node = 2;  // the first to join: its join starts ms
  e.joined_nodes = {1, 2};
  e.to = e.from;  // 3 stages on nodes 0, 1, 2
  e.from = LayoutSummary{1, 1, {0}, {8}};
  e.restored_from = RestoreOrigin::snapshot;
  e.steps_redone = 0;
  e.ms = 95.125;
  const auto row = replan_row(e);
  CHECK(row["node"] == 2);
  CHECK(row["nodes"] == nlohmann::json::array({1, 2}));
  CHECK(replan_log_line(e) ==
        "joined: nodes 1, 2 taken in: 1 replica × 1 stage on node 0 -> 1 replica × 3 stages on nodes 0, 1, 2, "
        "restored from snapshot, 0 steps redone, 95.1 ms");
}

TEST_CASE("a replan's log line says which node, both layouts, where the state came from and the time") {
  CHECK(replan_log_line(shrink_event()) ==
        "replan: node 2 lost for good: 1 replica × 3 stages on nodes 0, 1, 2 -> 1 replica × 2 stages on "
        "nodes 0, 1, restored from buddy copies, 1 step redone, 412.5 ms");
}

TEST_CASE("a shrink onto fewer replicas says each replica's gradient shares in the row and the line") {
  ReplanEvent e = shrink_event();
  e.node = 1;
  e.from = {3, 1, {0, 1, 2}, {2}, {}};
  e.to = {2, 1, {0, 2}, {2}, {2, 1}};
  const auto row = replan_row(e);
  CHECK(row["to"]["gradient_shares"] == nlohmann::json::array({2, 1}));
  CHECK_FALSE(row["from"].contains("gradient_shares"));
  CHECK(replan_log_line(e) ==
        "replan: node 1 lost for good: 3 replicas × 1 stage on nodes 0, 1, 2 -> 2 replicas × 1 stage on "
        "nodes 0, 2 (gradient shares 2, 1), restored from buddy copies, 1 step redone, 412.5 ms");
}

TEST_CASE("summarize gives a layout's shape, its nodes and its partition") {
  ConfiguredLayout c;
  c.stages = 2;
  c.replicas = 2;
  c.micro_batches = 4;
  c.layers = 3;
  c.start_halves = sched::uniform_partition(3, 2);
  std::vector<LiveNode> nodes = {{0, {Device::cpu()}}, {1, {Device::cpu()}}, {4, {Device::cpu(), Device::cpu()}}};
  const Replan r = replan(c, nodes, ShrinkPolicy::automatic);
  REQUIRE(r.ok());
  const LayoutSummary s = summarize(*r.layout);
  CHECK(s.replicas == 2);
  CHECK(s.stages == 2);
  CHECK(s.nodes == std::vector<int>{0, 1, 4});
  CHECK(s.halves_per_model_stage == std::vector<int>{4, 2});
}

TEST_CASE("a grow without buddy copies says in its row and its log line that the state came from copies asked of the nodes") {
  ReplanEvent e = shrink_event();
  e.cause = ReplanEvent::Cause::joined;
  std::swap(e.from, e.to);
  e.restored_from = RestoreOrigin::asked_copies;
  e.steps_redone = 0;
  e.ms = 95.125;
  CHECK(replan_row(e)["restored_from"] == "copies asked of the nodes");
  CHECK(replan_log_line(e) ==
        "joined: node 2 taken in: 1 replica × 2 stages on nodes 0, 1 -> 1 replica × 3 stages on nodes 0, 1, 2, "
        "restored from copies asked of the nodes, 0 steps redone, 95.1 ms");
  // Each origin has a name of its own.
  const std::set<std::string> names{restore_origin_name(RestoreOrigin::snapshot),
                                    restore_origin_name(RestoreOrigin::asked_copies),
                                    restore_origin_name(RestoreOrigin::buddy_copies),
                                    restore_origin_name(RestoreOrigin::checkpoint)};
  CHECK(names.size() == 4);
}
