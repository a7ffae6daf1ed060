#pragma once
// Issue 44: where a traced run moved onto another layout. The coordinator's replan record
// (a shrink: a node lost for good) and joined record (a grow: a node taken in) each end a
// layout generation. A record's `round` is the last round the coordinator had started
// before it (CoordinatorProbe writes it whatever trace.steps says), and the round counter
// runs on across layouts, so rounds up to it ran the layout before and later rounds the
// next one: schedule.json's "relayouts", in the same order (trace_plans.hpp). Pure.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "actors/trace/trace_record.hpp"

namespace conveyor::trace {

struct LayoutSwitch {
  std::uint32_t after_round = 0;  // the last round of the layout it left
  bool joined = false;            // a grow (joined) rather than a shrink (replan)
  int node = 0;                   // the node lost for good, or taken in
  std::int64_t step = 0;          // the step the run went on from
  std::size_t record = 0;         // index into the records given
};

/// The replan and joined records of `records`, in the order they happened (by round).
std::vector<LayoutSwitch> find_layout_switches(const std::vector<Record>& records);
/// The layout generation that ran round `round`: the switches that came before it.
int generation_of(const std::vector<LayoutSwitch>& switches, std::uint32_t round);

}  // namespace conveyor::trace
