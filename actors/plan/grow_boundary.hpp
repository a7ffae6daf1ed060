#pragma once
// Issue 44's grow: whether nodes that joined a shrunk job are taken in at a step boundary
// (the coordinator asks at every one: coordinator_grow.cpp). Pure logic, no CAF.
//
// What must hold: the grown layout's state is cut from node 0's snapshots of this very
// boundary, so a boundary qualifies only where every stage takes a snapshot
// (fault.snapshot_every divides the steps done); nothing is grown onto after the last
// step (no step would run on it); and fault.grow decides among the rest (grow_now:
// at_step any, at_checkpoint one where a checkpoint was written, never none).
#include <cstdint>

#include "actors/plan/recovery_policy.hpp"

namespace conveyor {

/// A step boundary, as the grow decision sees it.
struct GrowBoundary {
  std::int64_t steps_done = 0;  // steps completed at this boundary
  std::int64_t steps = 0;       // train.steps
  int snapshot_every = 1;       // fault.snapshot_every (0: no snapshots)
  bool checkpointed = false;    // a checkpoint was written here
};

/// Whether joined nodes are taken in at `b` under `policy` (see the top).
bool grow_at(GrowPolicy policy, const GrowBoundary& b);

}  // namespace conveyor
