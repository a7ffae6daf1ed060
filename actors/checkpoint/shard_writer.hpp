#pragma once
// A stage's shard: a safetensors file (the format of kernels/io/safetensors.hpp, read
// back by read_safetensors and by Python's `safetensors`) written through the Filesystem
// interface so that faults can be injected, with its sha256 computed from the bytes as
// they are written.
#include <string>
#include <vector>

#include "actors/checkpoint/filesystem.hpp"
#include "actors/checkpoint/manifest.hpp"
#include "kernels/io/safetensors.hpp"

namespace conveyor::checkpoint {

/// The 8-byte length plus the JSON header (padded with spaces to a multiple of 8) for
/// `tensors` packed in the order given. Throws std::invalid_argument on an empty,
/// reserved or repeated name, or a tensor that is not a defined host tensor.
std::string encode_shard_header(const std::vector<NamedTensor>& tensors);

/// Writes `dir/stage-<stage>.safetensors` atomically (atomic_file.hpp); returns its
/// manifest entry. The folder is not fsync'd here (the checkpoint writer does it once).
ShardEntry write_shard(Filesystem& fs, const std::string& dir, int stage,
                       const std::vector<NamedTensor>& tensors);

/// The same shard written atomically to `path` (a name other than its final one: a
/// staged shard, staged_shards.hpp); the entry still names stage-<stage>.safetensors.
ShardEntry write_shard_to(Filesystem& fs, const std::string& path, int stage,
                          const std::vector<NamedTensor>& tensors);

}  // namespace conveyor::checkpoint
