#pragma once
// The snapshot a stage keeps of the state it was just restored to from a copy (a node's
// rejoin, issue 44's shrink and grow: RestoreFromCopy), so that the next recovery can go
// back to that step again. The copy's tensors are that state: restore_state() copied them
// into the model, and nothing writes them afterwards (received buffers, or node 0's
// snapshot bytes), so they are kept as they are instead of capturing the model again —
// a capture copied the whole state once more (~0.6 GB, seconds on a loaded 2-core VM for
// a ~100 M-parameter model, docs/RELIABILITY.md).
// What must hold: the snapshot equals, bit for bit and name for name, what the model's
// capture would give. That holds where the stage is one chunk on the host, whose capture
// is its named host tensors, exactly the names of the copy; a stage of several chunks
// (each chunk's snapshot holds its own tensors) or on a GPU (its snapshot is a device one)
// is captured again (nullopt here).
#include <cstdint>
#include <optional>
#include <vector>

#include "actors/fault/snapshot_store.hpp"
#include "actors/plan/placement.hpp"

namespace conveyor {

/// The stage's snapshot after `steps_done` steps made of `tensors` (no copy: they are
/// shared); nullopt where it must be captured from the model instead (see above).
std::optional<StageStateSnapshot> restored_snapshot(const RankPlacement& stage, std::int64_t steps_done,
                                                    std::vector<NamedTensor> tensors,
                                                    std::int64_t optimizer_steps);

}  // namespace conveyor
