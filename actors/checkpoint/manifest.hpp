#pragma once
// manifest.json: what a checkpoint holds and how to check it. Written last (see
// checkpoint_writer.hpp), so its presence is what makes a checkpoint complete.
//
// Format (JSON object, format_version 1; every field required unless marked):
//   "format_version": 1
//   "step":           completed optimizer steps; the resumed run runs this step next
//   "optimizer_steps": AdamW's step count t (equals "step" unless steps were skipped)
//   "seed":           the run's seed; with "step" it fixes the data position, since which
//                     sequences a micro-batch gets is a pure function of (seed, step, mb)
//   "schedule":       schedule name ("1f1b", ...)
//   "stages":         number of pipeline stages that wrote the checkpoint (>= 1)
//   "partition":      transformer blocks per stage (or per chunk, in chunk order); 6.5 when
//                     a stage holds one half of a block (kernels/model/stage_slice.hpp)
//   "config":         the resolved config text (YAML or JSON) of the run that wrote it
//   "rng":            (optional) {stream name: opaque state string}
//   "shards":         [{"file": "stage-0.safetensors", "stage": 0, "bytes": N,
//                       "sha256": "<64 lowercase hex>", "tensors": ["wte.weight", ...]}]
// Parsing rejects unknown versions, missing or mistyped fields, shard file names that are
// not plain names in the checkpoint folder, duplicate files or tensors, and fields that
// contradict each other (optimizer_steps > step; a partition that is not one entry of at
// least half a block per stage or per chunk).
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor::checkpoint {

inline constexpr int kManifestVersion = 1;
inline constexpr const char* kManifestFile = "manifest.json";

struct ShardEntry {
  std::string file;  // a plain name inside the checkpoint folder
  int stage = 0;
  std::uint64_t bytes = 0;
  std::string sha256;                // lowercase hex
  std::vector<std::string> tensors;  // global names, in file order

  friend bool operator==(const ShardEntry&, const ShardEntry&) = default;
};

struct Manifest {
  int format_version = kManifestVersion;
  std::int64_t step = 0;
  std::int64_t optimizer_steps = 0;
  std::uint64_t seed = 0;
  std::string schedule;
  int stages = 1;
  std::vector<std::int64_t> partition_halves;  // "partition" in half blocks
  std::string config;
  std::map<std::string, std::string> rng;
  std::vector<ShardEntry> shards;

  friend bool operator==(const Manifest&, const Manifest&) = default;
};

/// Pretty-printed JSON text, fields in the order above.
std::string encode_manifest(const Manifest& manifest);

/// Parses and checks a manifest. `path` is only used in errors, which are CheckpointError
/// naming the path and the field ("shards[2].sha256 must be 64 lowercase hex digits").
Manifest parse_manifest(std::string_view text, const std::string& path);

}  // namespace conveyor::checkpoint
