#pragma once
// `conveyor trace summary`: what the traced train steps spent their time on, per stage,
// with the simulator's prediction for the same measured durations beside it.
// Over a step's span (first action start to last action end, every stage):
//   busy   = the stage's actions' durations;
//   idle   = gaps between the stage's own first and last action (waiting for input);
//   bubble = span − busy (idle plus the warm-up / cool-down before and after).
// Fractions are of the summed spans. Communication: per stage, the time from each
// incoming message's send to its receive, its count and bytes.
// A run that changed layout (issue 44) is summarised layout by layout: each summary counts
// the stage actors of the layout that ran its rounds and simulates its plans; the round a
// shrink interrupted is left out, and so is, from a stage's row, the bubble and the
// simulation, a step whose records the stage's lost node took with it
// (relayout_rounds.hpp). Pure.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/trace/critical_path.hpp"
#include "actors/trace/trace_set.hpp"

namespace conveyor::trace {

struct StageSummary {
  int stage = 0;
  double busy_ms = 0, idle_ms = 0, bubble_ms = 0;
  double busy_fraction = 0, idle_fraction = 0, bubble_fraction = 0;
  // Action time that ran beside another action of the stage (a GPU's streams): the sum
  // of action durations is busy_ms + overlap_ms.
  double overlap_ms = 0;
  double comm_ms = 0;          // summed send → receive time of incoming messages
  std::uint64_t messages = 0;  // incoming PipeMessages
  std::uint64_t bytes = 0;
  std::optional<double> simulated_bubble_fraction;
  // Issue 44: train steps left out of this row (its fractions are of the others): the
  // stage actor ran on a node lost for good later, and its records of them went with it.
  int steps_lost = 0;
};

struct TraceSummary {
  int generation = 0;         // the layout summarised (0: the one the run started with)
  std::int64_t from_step = 0; // generation > 0: the step the run went on from on it
  std::string change;         // generation > 0: "after node 2 was lost for good", "after node 2 joined"
  std::vector<std::string> notes;  // rounds left out, records a lost node took with it
  int steps = 0;          // train steps in the trace
  int stages = 0;         // stage actors: replicas × pipeline ranks
  int replicas = 1;       // parallel.data (actor = replica * stages / replicas + rank)
  double span_ms = 0;     // summed over steps
  double step_ms = 0;     // mean span
  double bubble = 0;      // measured: sum(bubble) / (stages × span)
  std::optional<double> simulated_step_ms;  // simulator replaying each step's durations
  std::optional<double> simulated_bubble;
  std::vector<StageSummary> per_stage;
  std::int64_t path_step = -1;  // the step whose critical path is shown (the last one)
  CriticalPath path;
  std::string path_text;
};

/// The train rounds layout `generation` ran (the only layout of a run that kept it).
/// Throws InputError when the trace holds no train step of it, or an action whose times no
/// run writes (action_times.hpp), naming it.
TraceSummary summarize(const TraceSet& set, int generation = 0);
/// One summary per layout that ran a train round of the trace, in generation order.
/// Throws as summarize() when there is none.
std::vector<TraceSummary> summarize_layouts(const TraceSet& set);
nlohmann::json summary_json(const TraceSummary& s);
/// One layout: summary_json of it; several: {"layouts": [summary_json of each, …]}.
nlohmann::json summary_json(const std::vector<TraceSummary>& layouts);
std::string summary_text(const TraceSummary& s);
/// Each layout's summary_text under a line naming the layout (alone: no such line).
std::string summary_text(const std::vector<TraceSummary>& layouts);

}  // namespace conveyor::trace
