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
  int generation = 0;  // the layout that ran it (TraceSet::generation_of)
  /// Per stage (index = rank), the indices into TraceSet::records of its actions, by start.
  std::vector<std::vector<std::size_t>> actions;
  std::int64_t first_start = 0, last_end = 0;  // over the actions of every stage
  std::size_t action_count() const;
};

/// Rounds by round number. `stages` is the number of stage actors (stage_count).
std::map<std::uint32_t, Round> split_rounds(const TraceSet& set, int stages);
/// Stage actors in the trace: the plans' ranks × replicas (of the largest layout the run
/// ran), else the highest stage in a record + 1. (Records name stage actors; with
/// replicas, actor = replica * P + rank.)
int stage_count(const TraceSet& set);
/// Stage actors of the layout that ran `round` (stage_count(set) when its plans are unknown).
int stage_count(const TraceSet& set, const Round& round);
/// The pipeline rank stage actor `actor` runs in round `round`: actor % P with the plans
/// of its layout, else the actor.
int pipeline_rank(const TraceSet& set, int actor, std::uint32_t round);
/// The plan stage actor `actor` had in `round` (the eval wave its lowest micro-batch is
/// in); empty when the plans of the round's layout are unknown or give the actor none.
std::vector<sched::Action> plan_of(const TraceSet& set, const Round& round, int actor);
/// The action of record `r` as it is written in its stage actor's plan (rank = the actor's
/// pipeline rank in the layout of r's round), and as printed for people (rank = the
/// actor) with `as_actor`.
sched::Action action_of(const TraceSet& set, const Record& r, bool as_actor = false);

}  // namespace conveyor::trace
