// Issue 44's grow decision at a step boundary (actors/plan/grow_boundary.hpp): only where
// every stage takes a snapshot, never after the last step, and as fault.grow says.
#include <doctest/doctest.h>

#include "actors/plan/grow_boundary.hpp"

using namespace conveyor;

TEST_CASE("fault.grow at_step takes joined nodes in at the next boundary where a snapshot is taken") {
  CHECK(grow_at(GrowPolicy::at_step, {.steps_done = 7, .steps = 24, .snapshot_every = 1}));
  // Every 4 steps: boundaries 5, 6, 7 wait, 8 takes them.
  CHECK_FALSE(grow_at(GrowPolicy::at_step, {.steps_done = 5, .steps = 24, .snapshot_every = 4}));
  CHECK_FALSE(grow_at(GrowPolicy::at_step, {.steps_done = 7, .steps = 24, .snapshot_every = 4}));
  CHECK(grow_at(GrowPolicy::at_step, {.steps_done = 8, .steps = 24, .snapshot_every = 4}));
  // No snapshots: no state to cut for the grown layout.
  CHECK_FALSE(grow_at(GrowPolicy::at_step, {.steps_done = 8, .steps = 24, .snapshot_every = 0}));
}

TEST_CASE("fault.grow at_checkpoint waits for a boundary where a checkpoint was written") {
  CHECK_FALSE(grow_at(GrowPolicy::at_checkpoint, {.steps_done = 6, .steps = 24, .snapshot_every = 1}));
  CHECK(grow_at(GrowPolicy::at_checkpoint,
                {.steps_done = 6, .steps = 24, .snapshot_every = 1, .checkpointed = true}));
  CHECK_FALSE(grow_at(GrowPolicy::at_checkpoint,
                      {.steps_done = 6, .steps = 24, .snapshot_every = 4, .checkpointed = true}));
}

TEST_CASE("fault.grow never takes no node in, and nothing grows after the last step") {
  CHECK_FALSE(grow_at(GrowPolicy::never, {.steps_done = 6, .steps = 24, .snapshot_every = 1, .checkpointed = true}));
  CHECK_FALSE(grow_at(GrowPolicy::at_step, {.steps_done = 24, .steps = 24, .snapshot_every = 1}));
  CHECK(grow_at(GrowPolicy::at_step, {.steps_done = 23, .steps = 24, .snapshot_every = 1}));
}
