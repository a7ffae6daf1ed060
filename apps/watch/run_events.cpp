#include "apps/watch/run_events.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace conveyor::watch {
namespace {

using nlohmann::json;

std::optional<std::int64_t> step_of(const json& row) {
  for (const char* key : {"step", "after_step"})
    if (const auto it = row.find(key); it != row.end() && it->is_number_integer()) return it->get<std::int64_t>();
  return std::nullopt;
}

std::string text_of(const json& row, const char* key) {
  const auto it = row.find(key);
  return it != row.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The row without its "event" and step, as compact JSON: a row kind this reader knows
// only by name still says what it carries.
std::string rest_of(const json& row) {
  json rest = row;
  for (const char* key : {"event", "step"}) rest.erase(key);
  return rest.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string recovery_detail(const json& row) {
  const auto stages = row.value("stages", std::vector<int>{});
  std::string text = fmt::format("stage(s) {}", stages.empty() ? std::string("?") : fmt::format("{}", fmt::join(stages, ", ")));
  if (const auto restored = row.find("restored_step"); restored != row.end() && restored->is_number_integer())
    text += fmt::format(" back at step {}", restored->get<std::int64_t>());
  if (const auto ms = row.find("recovery_ms"); ms != row.end() && ms->is_number())
    text += fmt::format(" in {:.0f} ms", ms->get<double>());
  if (const std::string from = text_of(row, "restored_from"); !from.empty()) text += " from " + from;
  if (const std::string reason = text_of(row, "reason"); !reason.empty()) text += ": " + reason;
  return text;
}

std::string replan_detail(const json& row) {
  const auto layout = [&](const char* key) -> std::string {
    const auto it = row.find(key);
    if (it == row.end() || !it->is_object()) return "?";
    return fmt::format("{} stage(s) × {} replica(s) on node(s) {}", it->value("stages", 0), it->value("replicas", 1),
                       fmt::join(it->value("nodes", std::vector<int>{}), ", "));
  };
  std::string why = row.contains("lost_node") ? fmt::format("node {} given up on", row.value("lost_node", -1))
                                              : fmt::format("node {} joined", row.value("node", -1));
  // A grow that seated several nodes at one boundary names them all (replan_event.hpp).
  if (const auto nodes = row.find("nodes"); !row.contains("lost_node") && nodes != row.end() && nodes->is_array() &&
                                            nodes->size() > 1 &&
                                            std::all_of(nodes->begin(), nodes->end(),
                                                        [](const json& n) { return n.is_number_integer(); }))
    why = fmt::format("nodes {} joined", fmt::join(nodes->get<std::vector<int>>(), ", "));
  return fmt::format("{}: {} → {}; state from {}", why, layout("from"), layout("to"), text_of(row, "restored_from"));
}

void push_event(RunStatus& s, EventStatus e) {
  s.recent_events.push_back(std::move(e));
  if (s.recent_events.size() > RunStatus::kRecentEvents) s.recent_events.erase(s.recent_events.begin());
}

}  // namespace

bool note_event_row(RunStatus& s, const std::string& event, const json& row) {
  if (event == "sample") {
    SampleStatus sample{step_of(row).value_or(0), text_of(row, "text"), text_of(row, "prompt")};
    if (sample.text.size() > RunStatus::kMaxSampleBytes) sample.text.resize(RunStatus::kMaxSampleBytes);
    s.last_sample = std::move(sample);
    return true;
  }
  if (event == "recovery") {
    const std::string fault = text_of(row, "fault");
    // A lost process's stages came back with its replacement: its node is up again.
    if (fault == "node") s.nodes_down.clear();
    push_event(s, {"recovery: " + (fault.empty() ? std::string("unknown") : fault), step_of(row), recovery_detail(row)});
    return true;
  }
  if (event == "node_lost") {
    const int node = row.value("node", -1);
    if (node >= 0) s.nodes_down.insert(node);
    push_event(s, {event, step_of(row), fmt::format("node {}: {}", node, text_of(row, "reason"))});
    return true;
  }
  if (event == "replan" || event == "joined") {
    // A shrink gives the lost node up; a grow brings a node in: either way none is waiting.
    s.nodes_down.clear();
    push_event(s, {event, step_of(row), replan_detail(row)});
    return true;
  }
  if (event == "rejoin" || event == "restart") {
    if (event == "rejoin" && row.contains("node") && row["node"].is_number_integer())
      s.nodes_down.erase(row["node"].get<int>());
    push_event(s, {event, step_of(row), rest_of(row)});
    return true;
  }
  if (event == "resume") {
    push_event(s, {event, step_of(row), "from " + text_of(row, "from")});
    return false;  // run_status.cpp applies it too
  }
  if (event == "stopped") {
    push_event(s, {event, step_of(row), text_of(row, "reason")});
    return false;
  }
  return false;
}

}  // namespace conveyor::watch
