#pragma once
// The plans a traced run executed, saved beside the trace (DIR/trace/schedule.json) so
// the analysis needs nothing else:
//   {"version": 1,
//    "train": <schedule JSON, actors/schedule/json.hpp>,
//    "eval": [["0F0", "0F1", …], …]}   // per rank, the forward-only evaluation plan
// Model stages follow the train schedule's (rank, chunk) mapping. Pure.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/placement.hpp"
#include "actors/schedule/schedule.hpp"

namespace conveyor::trace {

struct TracePlans {
  sched::Schedule train;
  std::vector<std::vector<sched::Action>> eval;  // per rank

  /// The plan of `rank` for a train (eval = false) or eval round; empty if none.
  const std::vector<sched::Action>& plan(int rank, bool eval) const;
};

nlohmann::json trace_plans_json(const sched::Schedule& train,
                                const std::vector<std::vector<sched::Action>>& eval);
/// Throws InputError naming `name` when the text is not a plans document.
TracePlans parse_trace_plans(const std::string& text, const std::string& name);

}  // namespace conveyor::trace
