#pragma once
// Messages of a recovery (stage restart, NaN rollback), all inside one process:
//   C → S_r   TakeSnapshot{k}          before the first step: snapshot the starting state
//   S_r → C   SnapshotTaken
//   C → S_r   RestoreStage{k, fence}   drop the current plan, every message of a round
//                                      <= fence, and the gradients; load snapshot k
//   S_r → C   StageRestored
//   watchdog → C   (stage_hang_atom, culprit, verdict)   a hang to recover from
#include <caf/all.hpp>
#include <cstdint>
#include <string>

namespace conveyor {

struct TakeSnapshot {
  std::int64_t steps_done = 0;
};

struct SnapshotTaken {
  int rank = 0;
  std::int64_t steps_done = 0;
};

struct RestoreStage {
  std::int64_t steps_done = 0;   // the snapshot to load (SnapshotStore)
  std::int64_t round_fence = 0;  // rounds up to this one are void; the next plan is fence + 1
};

struct StageRestored {
  int rank = 0;
  std::int64_t steps_done = 0;
};

/// From the hang watchdog under fault.policy restart: the stage its verdict blames (-1:
/// none in particular) and the verdict.
using stage_hang_atom = caf::atom_constant<caf::atom("stagehang")>;

}  // namespace conveyor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::TakeSnapshot)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::SnapshotTaken)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::RestoreStage)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::StageRestored)
