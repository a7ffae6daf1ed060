#pragma once
// Writes one checkpoint, synchronously, in an order that makes it atomic:
//   1. create <dir>/step-N/ (an old step-N is first made incomplete by removing its
//      manifest, then removed) and fsync <dir>;
//   2. each shard: temp file, fsync, rename (atomic_file.hpp);
//   3. fsync step-N/ so the shard renames are durable before the manifest exists;
//   4. manifest.json: temp file, fsync, rename, then fsync step-N/ again.
// Until step 4's rename the folder has no manifest and every reader ignores it; after it,
// every file the manifest names is complete and durable. A crash or error at any point
// therefore leaves either the previous checkpoints alone (and an ignored folder) or a
// complete new one.
//   5. prune (only now, after the new one is complete): keep the `keep` newest checkpoints
//      that verify (verified_checkpoints.hpp; the new one is one of them); remove older
//      ones (manifest first, so a crash mid-removal leaves an incomplete folder, not a
//      manifest pointing at missing shards) and every incomplete folder (leftovers of
//      failed writes). One that does not verify never counts among the kept: it is
//      removed when older than all of them, else left with a warning.
// REQUIRES: one writer per checkpoint folder at a time.
#include <cstdint>
#include <string>
#include <vector>

#include "actors/checkpoint/filesystem.hpp"
#include "actors/checkpoint/snapshot.hpp"
#include "actors/checkpoint/verified_checkpoints.hpp"

namespace conveyor::checkpoint {

struct WriteResult {
  std::string path;                  // the step folder written
  std::int64_t step = 0;
  std::uint64_t bytes = 0;           // shard and manifest bytes written
  std::uint64_t placed_bytes = 0;    // of those, shards other processes wrote (StageShard::place)
  double seconds = 0.0;
  std::vector<std::string> pruned;   // folders removed
  std::vector<std::string> warnings; // pruning failures: the new checkpoint is complete
};

/// Writes `snapshot` under `checkpoint_dir` and prunes to `keep` verified checkpoints.
/// `verified` is the writer's memory of what verified (null: every kept one is hashed).
/// Throws CheckpointError naming the file and the reason (and the step) when the write
/// fails; the previous checkpoints are then intact. Throws std::invalid_argument when
/// keep < 1 or the snapshot has no shards or two shards for one stage.
WriteResult write_checkpoint(Filesystem& fs, const std::string& checkpoint_dir,
                             const Snapshot& snapshot, int keep,
                             VerifiedCheckpoints* verified = nullptr);

}  // namespace conveyor::checkpoint
