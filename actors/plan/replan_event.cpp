#include "actors/plan/replan_event.hpp"

#include <fmt/format.h>

namespace conveyor {
namespace {

// Half blocks as blocks, integers where whole: 4 -> 2, 5 -> 2.5.
nlohmann::json blocks(int halves) {
  if (halves % 2 == 0) return halves / 2;
  return halves / 2.0;
}

nlohmann::json layout_json(const LayoutSummary& l) {
  nlohmann::json partition = nlohmann::json::array();
  for (int h : l.halves_per_model_stage) partition.push_back(blocks(h));
  nlohmann::json out = {{"replicas", l.replicas}, {"stages", l.stages}, {"nodes", l.nodes}, {"partition", partition}};
  if (!l.gradient_shares.empty()) out["gradient_shares"] = l.gradient_shares;
  return out;
}

std::string layout_text(const LayoutSummary& l) {
  std::string nodes;
  for (int n : l.nodes) nodes += (nodes.empty() ? "" : ", ") + std::to_string(n);
  std::string shares;
  for (int n : l.gradient_shares) shares += (shares.empty() ? "" : ", ") + std::to_string(n);
  return fmt::format("{} on node{} {}{}", describe_shape(l.replicas, l.stages), l.nodes.size() == 1 ? "" : "s",
                     nodes, shares.empty() ? "" : " (gradient shares " + shares + ")");
}

}  // namespace

std::string restore_origin_name(RestoreOrigin origin) {
  switch (origin) {
    case RestoreOrigin::snapshot: return "snapshot";
    case RestoreOrigin::asked_copies: return "copies asked of the nodes";
    case RestoreOrigin::buddy_copies: return "buddy copies";
    case RestoreOrigin::checkpoint: return "checkpoint";
  }
  return "?";
}

LayoutSummary summarize(const ElasticLayout& layout) {
  return LayoutSummary{layout.replicas, layout.stages, layout.nodes(), layout.halves_per_model_stage, {}};
}

static std::vector<int> joined_nodes(const ReplanEvent& e) {
  return e.joined_nodes.empty() ? std::vector<int>{e.node} : e.joined_nodes;
}

nlohmann::json replan_row(const ReplanEvent& e) {
  const bool lost = e.cause == ReplanEvent::Cause::lost;
  nlohmann::json row = {{"event", lost ? "replan" : "joined"}};
  row[lost ? "lost_node" : "node"] = e.node;
  if (!lost) row["nodes"] = joined_nodes(e);
  row["from"] = layout_json(e.from);
  row["to"] = layout_json(e.to);
  row["restored_from"] = restore_origin_name(e.restored_from);
  row["steps_redone"] = e.steps_redone;
  row["ms"] = e.ms;
  row["phases_ms"] = {{"wait", e.phases_ms.wait},
                      {"cut", e.phases_ms.cut},
                      {"spawn", e.phases_ms.spawn},
                      {"restore", e.phases_ms.restore}};
  return row;
}

std::string replan_log_line(const ReplanEvent& e) {
  const bool lost = e.cause == ReplanEvent::Cause::lost;
  const auto nodes = lost ? std::vector<int>{e.node} : joined_nodes(e);
  std::string named;
  for (int n : nodes) named += (named.empty() ? "" : ", ") + std::to_string(n);
  return fmt::format("{}: node{} {} {}: {} -> {}, restored from {}, {} step{} redone, {:.1f} ms",
                     lost ? "replan" : "joined", nodes.size() == 1 ? "" : "s", named,
                     lost ? "lost for good" : "taken in", layout_text(e.from),
                     layout_text(e.to), restore_origin_name(e.restored_from), e.steps_redone,
                     e.steps_redone == 1 ? "" : "s", e.ms);
}

}  // namespace conveyor
