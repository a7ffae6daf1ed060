#pragma once
// The record of one elastic re-plan (issue 44): the metrics.jsonl row and the log line a
// shrink or a grow writes, built here from plain values so that their form is tested
// without a job. The row, one line of JSON, has exactly these fields:
//   {"event": "replan", "lost_node": 2,          (a shrink: the node given up on)
//    "from": {"replicas": 1, "stages": 3, "nodes": [0, 1, 2], "partition": [2, 1, 1]},
//    "to":   {"replicas": 1, "stages": 2, "nodes": [0, 1], "partition": [2, 2]},
//    "restored_from": "buddy copies", "steps_redone": 1, "ms": 412.5}
// a grow (a node taken in after a shrink) writes the same fields under its own event:
//   {"event": "joined", "node": 2, "nodes": [2], "from": {... 2 stages ...},
//    "to": {... 3 stages ...}, "restored_from": "snapshot", "steps_redone": 0, "ms": 95.1}
// with ms from the node's join to the first step of the grown layout. "nodes" are every
// node that one grow took in, ascending: two processes that joined before the same step
// boundary are seated by one move, so they share one row ("node" is the first to join,
// whose join starts ms) rather than two rows that would split one move's time. "partition" is blocks per model stage
// (3.5: three blocks and a half), "nodes" the nodes that run a stage actor. restored_from
// is "snapshot" (every stage of the new layout from the in-memory snapshots of the nodes
// present), "copies asked of the nodes" (a grow without buddy copies: the same snapshots,
// node 0 having asked the other nodes' stages for copies of that boundary's, as a
// checkpoint's capture does), "buddy copies" (a lost node's stages from node 0's copies of
// its snapshots) or "checkpoint" (the newest verified checkpoint of the run); steps_redone counts the steps
// replayed from that state; ms is the time from the node's loss (or join) to the first
// step of the new layout. "phases_ms" splits ms (issue 44, item 8):
//   {"wait": …,     the rejoin timeout (a shrink) or the wait for a boundary (a grow),
//    "cut": …,      choosing the layout and cutting the states for it,
//    "spawn": …,    every node present spawning its actors of the new layout,
//    "restore": …}  every new actor restoring its cut state (the replay follows);
// the time from a node's death to its detection is not the coordinator's to see (the
// recovery row's reason says how it was seen).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/plan/replan.hpp"

namespace conveyor {

/// Where the new layout's state came from (see the top).
enum class RestoreOrigin { snapshot, asked_copies, buddy_copies, checkpoint };

/// "snapshot", "copies asked of the nodes", "buddy copies", "checkpoint".
std::string restore_origin_name(RestoreOrigin origin);

/// A layout as the row shows it.
struct LayoutSummary {
  int replicas = 1;
  int stages = 1;
  std::vector<int> nodes;                   // ascending
  std::vector<int> halves_per_model_stage;  // written as blocks
  // A job shrunk to fewer replicas: by replica, the configured replicas' gradient shares
  // it computes ("gradient_shares": [2, 1]); empty otherwise (not written).
  std::vector<int> gradient_shares;
};

LayoutSummary summarize(const ElasticLayout& layout);

/// Where a re-plan's time went (see the top), in ms.
struct ReplanPhases {
  double wait = 0, cut = 0, spawn = 0, restore = 0;
};

struct ReplanEvent {
  enum class Cause { lost, joined };
  Cause cause = Cause::lost;
  int node = 0;  // the node lost for good, or the (first) node that joined
  LayoutSummary from;
  LayoutSummary to;
  RestoreOrigin restored_from = RestoreOrigin::snapshot;
  std::int64_t steps_redone = 0;
  double ms = 0.0;
  ReplanPhases phases_ms;
  std::vector<int> joined_nodes;  // a grow: every node it took in, ascending; empty: {node}
};

/// The metrics.jsonl row (see the top): "replan" for a shrink, "joined" for a grow.
nlohmann::json replan_row(const ReplanEvent& event);

/// The one log line: "replan: node 2 lost for good: 1 replica × 3 stages on nodes 0, 1, 2
/// -> 1 replica × 2 stages on nodes 0, 1, restored from buddy copies, 1 step redone, 412.5 ms";
/// a grow's: "joined: node 2 taken in: 1 replica × 2 stages on nodes 0, 1 -> 1 replica × 3
/// stages on nodes 0, 1, 2, restored from snapshot, 0 steps redone, 95.1 ms"; a grow that
/// took in two nodes: "joined: nodes 1, 2 taken in: …".
std::string replan_log_line(const ReplanEvent& event);

}  // namespace conveyor
