#pragma once
// What the live page lists as it happened, from metrics.jsonl's event rows: the latest
// text sample (`sample` rows), recovery events (recovery, node_lost, replan, and rejoin
// or restart rows should a writer add them; resume and stopped), and which nodes are
// down. Kept apart from run_status.cpp's counters: these are for people, the counters
// for Prometheus. Pure, as run_status.hpp.
#include <string>

#include <nlohmann/json.hpp>

#include "apps/watch/run_status.hpp"

namespace conveyor::watch {

/// Notes an event row of kind `event` (the row's "event") in s.recent_events,
/// s.last_sample and s.nodes_down. Returns whether the kind is one of this file's, so
/// the caller counts the others as unknown. Throws json::exception on a field of the
/// wrong type (the caller counts the row unreadable).
bool note_event_row(RunStatus& s, const std::string& event, const nlohmann::json& row);

}  // namespace conveyor::watch
