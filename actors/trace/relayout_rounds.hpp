#pragma once
// Issue 44: what a change of layout did to the rounds around it, which the analysis reads
// as such rather than as protocol violations:
// - the round a shrink interrupted: the last round before a replan record, left
//   incomplete (its stages stopped part-way when the node was lost, and the messages in
//   flight went with the old actors);
// - the records a node lost for good took with it: a TraceBuffer hands its file half a
//   ring at a time, so a killed process's file ends at its last hand-off (or is replaced
//   when the node is started again: keep_earlier_trace). The stage actors it ran in the
//   layouts before the shrink that lost it miss actions and message ends there.
// Pure.
#include <cstdint>
#include <map>

#include "actors/trace/trace_rounds.hpp"

namespace conveyor::trace {

/// Round number → the shrink that interrupted it: the last round of its layout before a
/// replan record, where some stage actor ran fewer actions than its plan (with no plans
/// known for that layout: the last round before the replan, whatever ran).
std::map<std::uint32_t, const LayoutSwitch*> interrupted_rounds(
    const TraceSet& set, const std::map<std::uint32_t, Round>& rounds);

/// Stage actor → the node lost for good that ran it in layout `generation` (a later shrink
/// lost it): its records in rounds of that layout may be missing. Empty when schedule.json
/// does not say which node ran which actor (node_of_actor).
std::map<int, int> actors_lost_later(const TraceSet& set, int generation);

}  // namespace conveyor::trace
