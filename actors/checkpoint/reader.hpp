#pragma once
// Reading a checkpoint back, trusting nothing: the manifest is parsed strictly, and every
// shard's size and sha256 must match it before a single tensor is used. A corrupt,
// truncated, missing or extra-listed shard is a CheckpointError naming the file and what
// differs. (Tensor bytes are then read with kernels' read_safetensors, which checks the
// safetensors structure; shards are immutable once their manifest exists.)
#include <map>
#include <string>

#include "actors/checkpoint/filesystem.hpp"
#include "actors/checkpoint/manifest.hpp"
#include "kernels/tensor/tensor.hpp"

namespace conveyor::checkpoint {

/// Parses `step_dir/manifest.json` (an incomplete folder, one without it, is an error).
Manifest read_manifest(Filesystem& fs, const std::string& step_dir);

/// read_manifest, its partition against the tensors its shards list (partition_check.hpp),
/// and every shard's size and sha256.
Manifest verify_checkpoint(Filesystem& fs, const std::string& step_dir);

struct LoadedCheckpoint {
  std::string path;
  Manifest manifest;
  std::map<std::string, Tensor> tensors;  // every tensor of every shard, by global name
};

/// verify_checkpoint, then every shard's tensors, each checked to be exactly the list the
/// manifest gives for it.
LoadedCheckpoint load_checkpoint(Filesystem& fs, const std::string& step_dir);

}  // namespace conveyor::checkpoint
