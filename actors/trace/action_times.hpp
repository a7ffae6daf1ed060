#pragma once
// The times of a trace's actions, checked before they are summed. No run writes an action
// that ends before it starts, lasts more than a week, ends after a later round began (the
// coordinator starts round R+1 only once every stage reported round R, and a stage reports
// only after its device work of the round drained: stage_probe.hpp), or a round whose
// actions span more than a week. Such a record (a corrupt file, a clock offset gone wrong)
// would put absurd numbers in the summary, or wrap its sums below zero (a negative
// bubble); within these bounds no difference of two times of a round overflows. Pure.
#include <cstdint>

#include "actors/trace/trace_set.hpp"

namespace conveyor::trace {

/// Longest action, and longest round, a trace may hold.
inline constexpr std::int64_t kMaxActionNs = std::int64_t{7} * 24 * 3600 * 1'000'000'000;
/// How far an action may seem to end after the next round began: the clock offsets
/// measured between hosts at the rendezvous, and their drift over a run, stay well inside.
inline constexpr std::int64_t kRoundOverlapSlackNs = 1'000'000'000;

/// Throws InputError naming the first action record that breaks one of the rules above
/// (both ends of a round too long): its stage, action, phase and step, round and record
/// id, and the times at fault.
void check_action_times(const TraceSet& set);

}  // namespace conveyor::trace
