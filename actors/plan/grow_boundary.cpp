#include "actors/plan/grow_boundary.hpp"

#include "actors/plan/replan.hpp"

namespace conveyor {

bool grow_at(GrowPolicy policy, const GrowBoundary& b) {
  if (b.snapshot_every <= 0 || b.steps_done % b.snapshot_every != 0) return false;
  if (b.steps_done >= b.steps) return false;
  return grow_now(policy, b.checkpointed);
}

}  // namespace conveyor
