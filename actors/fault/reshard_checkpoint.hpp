#pragma once
// A checkpoint cut for another layout in memory (issue 44's shrink without buddy copies):
// when node 0 holds no copy of a lost node's snapshots, the shrunk job starts from the
// newest verified checkpoint of the run. Its shards, read from node 0's disk, are cut for
// the new plan's stage actors by the same function that cuts in-memory snapshots
// (reshard_snapshots.hpp: cut_states_for, i.e. reshard_states), so the new actors are
// restored exactly as after a shrink from buddy copies, and exactly as --resume would
// load the checkpoint into that layout (both take each tensor by its global name).
//
// What must hold:
// - every tensor of every shard is taken by exactly one new stage, with its shape (a
//   checkpoint of another model or a shard missing fails naming what, nothing restored);
// - each chunk of the result holds the manifest's AdamW step count, and steps_done is the
//   manifest's step.
// REQUIRES: `step_dir` verified (manifest, sizes, sha256: CheckpointHook::newest_checkpoint
// or resolve_resume did), so the shards' bytes are not hashed again here.
// Not supported (throws std::invalid_argument): a `to` that shards its optimizer state.
#include <cstdint>
#include <string>
#include <vector>

#include "actors/checkpoint/filesystem.hpp"
#include "actors/fault/reshard_snapshots.hpp"
#include "actors/fault/snapshot_store.hpp"
#include "actors/plan/job_plan.hpp"

namespace conveyor {

struct CheckpointCut {
  std::int64_t steps_done = 0;            // the checkpoint's step
  std::vector<StageStateSnapshot> states;  // by stage actor of `to` (replica-major)
};

/// The checkpoint in `step_dir` cut for `to`. Throws ReshardSnapshotsError naming the
/// checkpoint when it cannot be read or cut.
CheckpointCut reshard_checkpoint(checkpoint::Filesystem& fs, const std::string& step_dir, const JobPlan& to);

}  // namespace conveyor
