#pragma once
// The in-memory snapshots of one step, cut for another layout (issue 44's shrink and
// grow): every stage actor of the old plan's state after `steps_done` steps, pooled by the
// global tensor names, handed to the model stages of the new plan (reshard_states.hpp, the
// same cut a checkpoint's resharding makes). The coordinator restores the new layout's
// stage actors from the result exactly as a rejoined node's stages are restored from node
// 0's copies, so a shrunk job goes on from the state the old one held, bit for bit.
//
// What must hold:
// - one copy of each pipeline stage is read: replica 0's actors (ranks 0 .. P-1); every
//   replica of the new plan gets the same snapshots (replicas hold the same state at a
//   step boundary);
// - each new actor's snapshot holds one chunk per chunk of its placement, in chunk order
//   (StageWorker::restore_snapshot's order), each with the old snapshots' AdamW step count;
// - a stage of the old plan whose snapshot of the step is missing, or held only in its own
//   process (a marker), makes it throw naming the stage: nothing is restored partly.
// Not supported (throws std::invalid_argument): ZeRO-1 sharded optimizer state (each
// replica's capture holds only its part of the moments).
// Tensors share bytes with the store's snapshots (no copy); restoring copies them.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "actors/fault/snapshot_store.hpp"
#include "actors/plan/job_plan.hpp"

namespace conveyor {

/// Thrown when the old plan's snapshots of the step cannot be cut (missing, a marker, or
/// a CheckpointError of the cut itself), its text naming what.
class ReshardSnapshotsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// By stage actor of `to` (replica-major): its state after `steps_done` steps.
std::vector<StageStateSnapshot> reshard_snapshots(const SnapshotStore& store, std::int64_t steps_done,
                                                  const JobPlan& from, const JobPlan& to);

/// The cut itself, from the old stages' named tensors however they were held (a store's
/// snapshots, a checkpoint's shards: reshard_checkpoint.hpp), every chunk of the result
/// with `optimizer_steps`; `where` names the source in errors. By stage actor of `to`.
/// Throws ReshardSnapshotsError on any violation reshard_states reports.
std::vector<StageStateSnapshot> cut_states_for(const std::vector<std::vector<NamedTensor>>& old_stages,
                                               std::int64_t steps_done, std::int64_t optimizer_steps,
                                               const JobPlan& to, const std::string& where);

}  // namespace conveyor
