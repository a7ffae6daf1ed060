#pragma once
// A trace cut into rounds (one StepPlan each, train or eval), with each stage's actions
// in the order they ran. The unit the summary, the checker and the timeline work on. Pure.
#include <cstdint>
#include <map>
#include <vector>

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

/// Rounds by round number. `stages` is the number of ranks (the plans', or the highest
/// stage seen + 1).
std::map<std::uint32_t, Round> split_rounds(const TraceSet& set, int stages);
/// Ranks in the trace: the plans' stage count, else the highest stage in a record + 1.
int stage_count(const TraceSet& set);

}  // namespace conveyor::trace
