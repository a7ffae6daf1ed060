#pragma once
// A trace cut into rounds (one StepPlan each, train or eval), with each stage's actions
// in the order they ran. The unit the summary, the checker and the timeline work on. Pure.
#include <cstdint>
#include <map>
#include <vector>

#include "actors/plan/schedule/action.hpp"
#include "actors/trace/trace_set.hpp"

namespace conveyor::trace {

struct Round {
  std::uint32_t round = 0;
  std::int64_t step = 0;
  bool eval = false;
  /// Per stage (index = rank), the indices into TraceSet::records of its actions, by start.
  std::vector<std::vector<std::size_t>> actions;
  std::int64_t first_start = 0, last_end = 0;  // over the actions of every stage
  std::size_t action_count() const;
};

/// Rounds by round number. `stages` is the number of stage actors (stage_count).
std::map<std::uint32_t, Round> split_rounds(const TraceSet& set, int stages);
/// Stage actors in the trace: the plans' ranks × replicas, else the highest stage in a
/// record + 1. (Records name stage actors; with replicas, actor = replica * P + rank.)
int stage_count(const TraceSet& set);
/// The pipeline rank stage actor `actor` runs: actor % P with plans, else the actor.
int pipeline_rank(const TraceSet& set, int actor);
/// The action of record `r` as it is written in its stage actor's plan (rank = the actor's
/// pipeline rank), and as printed for people (rank = the actor) with `as_actor`.
sched::Action action_of(const TraceSet& set, const Record& r, bool as_actor = false);

}  // namespace conveyor::trace
