#pragma once
// The critical path through one round: the chain of actions that decided when the round
// ended. Walking back from the action that ended last, each action's start was gated
// either by the previous action on its stage or by the arrival of its input message (the
// receive it cites, whose send cites the producing action on another stage); the later
// of the two is the predecessor on the path. Pure.
#include <cstdint>
#include <string>
#include <vector>

#include "actors/trace/trace_rounds.hpp"

namespace conveyor::trace {

struct PathStep {
  std::size_t record = 0;      // an action, index into TraceSet::records
  bool via_message = false;    // gated by its input message (else by its stage's previous action)
  std::int64_t wait_ns = 0;    // from the gating event's end to this action's start (>= 0)
};

struct CriticalPath {
  std::vector<PathStep> steps;  // in time order
  std::int64_t span_ns = 0;     // first step's start to last step's end
  std::int64_t compute_ns = 0;  // time the steps' actions cover (overlaps counted once)
  std::int64_t wait_ns = 0;     // span − compute: messages in flight and runtime overhead

  /// "0F0 → 1F0 → 2F0 → … → 0B7" with ranks as prefixes.
  std::string str(const TraceSet& set) const;
};

CriticalPath critical_path(const TraceSet& set, const Round& round);

}  // namespace conveyor::trace
