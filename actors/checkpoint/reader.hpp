#pragma once
// Reading a checkpoint back, trusting nothing: the manifest is parsed strictly, and every
// shard's size and sha256 must match it before a single tensor is used. A corrupt,
// truncated, missing or extra-listed shard is a CheckpointError naming the file and what
// differs. (Tensor bytes are then read with kernels' read_safetensors, which checks the
// safetensors structure; shards are immutable once their manifest exists.)
#include <map>
#include <set>
#include <string>

#include "actors/checkpoint/filesystem.hpp"
#include "actors/checkpoint/manifest.hpp"
#include "actors/checkpoint/reshard.hpp"
#include "kernels/tensor/tensor.hpp"

namespace conveyor::checkpoint {

/// Parses `step_dir/manifest.json` (an incomplete folder, one without it, is an error).
Manifest read_manifest(Filesystem& fs, const std::string& step_dir);

/// read_manifest, its partition against the tensors its shards list (partition_check.hpp),
/// every shard's size, then every shard's sha256 (shards hashed on parallel threads; the
/// first failure in shard order is the one thrown).
Manifest verify_checkpoint(Filesystem& fs, const std::string& step_dir);

struct LoadedCheckpoint {
  std::string path;
  Manifest manifest;
  std::map<std::string, Tensor> tensors;  // every tensor of every shard, by global name
};

/// verify_checkpoint, then every shard's tensors (index_checkpoint, load_tensors).
LoadedCheckpoint load_checkpoint(Filesystem& fs, const std::string& step_dir);

/// What a checkpoint holds without its bytes: each shard's header alone is read, and must
/// list exactly the tensors (in order) that `manifest` gives for that shard.
struct CheckpointIndex {
  TensorCatalog tensors;                        // by global name: shape and dtype
  std::map<std::string, std::size_t> shard_of;  // by global name: index into manifest.shards
};
CheckpointIndex index_checkpoint(const std::string& step_dir, const Manifest& manifest);

/// The tensors named in `names` (each in `index`), by name: only the shards that hold them
/// are opened, and of those only the named tensors read. For a checkpoint that was
/// verified (resolve_resume): no shard is hashed again.
std::map<std::string, Tensor> load_tensors(const std::string& step_dir, const Manifest& manifest,
                                           const CheckpointIndex& index, const std::set<std::string>& names);

}  // namespace conveyor::checkpoint
