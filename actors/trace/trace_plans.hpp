#pragma once
// The plans a traced run executed, saved beside the trace (DIR/trace/schedule.json) so
// the analysis needs nothing else:
//   {"version": 1,
//    "train": <schedule JSON, actors/plan/schedule/json.hpp>,
//    "eval": [["0F0", "0F1", …], …],   // per rank, the whole forward-only evaluation
//    "eval_wave": W,                    // it ran in waves of W micro-batches, a round
//                                       // each (actors/plan/eval_plan.hpp); absent: one round
//    "replicas": R}                     // parallel.data; absent: 1
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

  /// The plan stage actor `actor` ran in a train round, or in the eval round whose wave
  /// holds `micro_batch`; empty if none (an actor outside the R·P of the run).
  std::vector<sched::Action> plan(int actor, bool eval, int micro_batch = 0) const;
  /// The run's stage actors: R replicas of the schedule's P ranks, replica-major.
  ReplicaLayout layout() const {  // P ranks: parse_trace_plans checks R x P <= kMaxTracedActors
    return ReplicaLayout{replicas, static_cast<int>(train.ranks.size())};
  }
};

nlohmann::json trace_plans_json(const sched::Schedule& train,
                                const std::vector<std::vector<sched::Action>>& eval,
                                int eval_wave, int replicas = 1);
/// Throws InputError naming `name` when the text is not a plans document.
TracePlans parse_trace_plans(const std::string& text, const std::string& name);

}  // namespace conveyor::trace
