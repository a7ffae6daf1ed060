#pragma once
// The plans a traced run executed, saved beside the trace (DIR/trace/schedule.json) so
// the analysis needs nothing else:
//   {"version": 1,
//    "train": <schedule JSON, actors/plan/schedule/json.hpp>,
//    "eval": [["0F0", "0F1", …], …],   // per rank, the whole forward-only evaluation
//    "eval_wave": W,                    // it ran in waves of W micro-batches, a round
//                                       // each (actors/plan/eval_plan.hpp); absent: one round
//    "replicas": R,                     // parallel.data; absent: 1
//    "node_of_actor": [0, 1, 2],        // the node that ran each stage actor; absent: unknown
//    "relayouts": [                     // issue 44: each layout the job moved onto, in order;
//      {"generation": 1,                //   absent: the job kept the layout it started with
//       "train": …, "eval": …, "eval_wave": W, "replicas": R, "node_of_actor": […]}, …]}
// The top level is the layout the job started with (generation 0), so a folder written
// before layouts were saved reads as a run that kept it. Which rounds ran which layout,
// and the step each went on from, are not in this file: the trace's replan and joined
// records mark the switches (layout_switch.hpp).
// Model stages follow the train schedule's (rank, chunk) mapping. With R replicas the
// trace's stage actors are replica-major (actor = replica * P + rank, as the run places
// them) and every replica runs the same train plans on its share of the micro-batches;
// replica 0 alone runs the evaluation plans. Pure.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/plan/placement.hpp"
#include "actors/plan/replica_placement.hpp"
#include "actors/plan/schedule/schedule.hpp"

namespace conveyor::trace {

struct TracePlans {
  sched::Schedule train;
  std::vector<std::vector<sched::Action>> eval;  // per rank, the whole evaluation
  int eval_wave = 0;                             // micro-batches per eval round; 0: all
  int replicas = 1;                              // parallel.data
  int generation = 0;              // issue 44: 0 the started layout, then one per re-layout
  std::vector<int> node_of_actor;  // the node of each stage actor; empty: unknown

  /// The plan stage actor `actor` ran in a train round, or in the eval round whose wave
  /// holds `micro_batch`; empty if none (an actor outside the R·P of the run).
  std::vector<sched::Action> plan(int actor, bool eval, int micro_batch = 0) const;
  /// The run's stage actors: R replicas of the schedule's P ranks, replica-major.
  ReplicaLayout layout() const {  // P ranks: parse_trace_plans checks R x P <= kMaxTracedActors
    return ReplicaLayout{replicas, static_cast<int>(train.ranks.size())};
  }
};

/// Which layout it is and where it ran (TracePlans' fields of the same names).
struct LayoutPlace {
  int generation = 0;
  std::vector<int> node_of_actor;
};

nlohmann::json trace_plans_json(const sched::Schedule& train,
                                const std::vector<std::vector<sched::Action>>& eval,
                                int eval_wave, int replicas = 1, const LayoutPlace& place = {});
/// `doc` (a schedule.json) with `layout` (trace_plans_json of the layout the job moved
/// onto) appended to its "relayouts".
void add_relayout(nlohmann::json& doc, nlohmann::json layout);
/// Throws InputError naming `name` when the text is not a plans document.
TracePlans parse_trace_plans(const std::string& text, const std::string& name);
/// Every layout of the document, in generation order: [0] the started one, then each of
/// "relayouts" (their generations must count up from 1). Throws InputError naming `name`.
std::vector<TracePlans> parse_trace_layouts(const std::string& text, const std::string& name);

}  // namespace conveyor::trace
