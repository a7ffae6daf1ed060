#pragma once
// Shards written by the process that holds them (checkpoint.writers: every_node). A
// process other than node 0 writes its stages' shards of step N into a staging folder
// beside the checkpoints, and node 0's writer moves them into step-N/ (a rename within
// one filesystem) before it writes the manifest:
//
//   node 0, at the boundary   prepare_staging: <dir>/.incoming/step-N/ and in it a file
//                             naming this attempt (a fresh random token)
//   node k, on a thread       write_staged_shard: the attempt's file must be there (else
//                             the folder is not node 0's: checkpoint.dir is not one
//                             filesystem both see), then the shard as
//                             stage-R.<token>.safetensors, atomically, fsync'd
//   node 0, writer thread     place_staged_shard: renamed to step-N/stage-R.safetensors,
//                             made durable with the other shards, before the manifest
//
// The staging folder is not a step folder: list_checkpoints, the pruning of incomplete
// checkpoints and every reader ignore it, so a shard on its way is never taken for part
// of a checkpoint. A staged name carries its attempt's token, so a late write of an
// earlier attempt at the same step can never replace this one's. Leftovers of failed
// writes are removed by later ones (remove_staging_before).
#include <cstdint>
#include <string>
#include <vector>

#include "actors/checkpoint/filesystem.hpp"
#include "actors/checkpoint/manifest.hpp"
#include "kernels/io/safetensors.hpp"

namespace conveyor::checkpoint {

/// Where the other processes write their shards of one step, and the attempt's token;
/// `error` instead when node 0 could not prepare the folder (the checkpoint then fails).
struct StagingTarget {
  std::string staging;
  std::string token;
  std::string error;
};

/// "<checkpoint_dir>/.incoming/step-000123".
std::string staging_dir(const std::string& checkpoint_dir, std::int64_t step);

/// 16 random lowercase hex digits: one attempt at one step's checkpoint.
std::string make_staging_token();

/// Creates the staging folder of `step` (if need be) and the attempt's file in it; durable
/// when it returns. Throws CheckpointError naming the folder.
void prepare_staging(Filesystem& fs, const std::string& checkpoint_dir, std::int64_t step,
                     const std::string& token);

/// Writes `stage`'s shard into `staging` (prepare_staging's folder) under the attempt's
/// name and returns its manifest entry (the final file name, stage-R.safetensors).
/// Throws CheckpointError when the attempt's file is not there (the message says
/// checkpoint.dir must be one folder every node sees), or the write fails.
ShardEntry write_staged_shard(Filesystem& fs, const std::string& staging, const std::string& token,
                              int stage, const std::vector<NamedTensor>& tensors);

/// Moves the shard `entry` describes, written by write_staged_shard with `token`, from
/// `staging` into `step_dir` under entry.file. Not durable until sync_dir(step_dir).
/// Throws CheckpointError naming the staged file when it is not there.
void place_staged_shard(Filesystem& fs, const std::string& staging, const std::string& token,
                        const std::string& step_dir, const ShardEntry& entry);

/// Removes the staging folders of steps below `step` (leftovers of writes that failed or
/// were never finished), and that of `step` itself when `inclusive`. Best effort: returns
/// what could not be removed, as warnings.
std::vector<std::string> remove_staging_before(Filesystem& fs, const std::string& checkpoint_dir,
                                               std::int64_t step, bool inclusive);

}  // namespace conveyor::checkpoint
