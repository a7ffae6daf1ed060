#pragma once
// `conveyor checkpoint verify` and `conveyor checkpoint export`: what a user asks of a
// checkpoint folder outside a run. Verify reports every checkpoint of a folder (intact,
// corrupt with the reason, or incomplete) without loading a tensor; export writes the
// model weights of one checkpoint (no optimizer state) as `conveyor train` writes
// weights.safetensors: the same names, order, dtype and metadata, so the export of a run's
// last checkpoint is byte for byte its weights.safetensors.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/checkpoint/filesystem.hpp"
#include "actors/checkpoint/layout.hpp"
#include "actors/checkpoint/manifest.hpp"
#include "actors/checkpoint/resume.hpp"
#include "kernels/io/safetensors.hpp"

namespace conveyor {

struct CheckpointReport {
  std::string path;
  std::int64_t step = 0;
  bool complete = false;              // holds manifest.json
  std::optional<std::string> error;   // why it failed verification; none when intact
  std::optional<checkpoint::Manifest> manifest;  // when intact
  std::uint64_t bytes = 0;            // shard bytes
  std::size_t tensors = 0;            // weights and optimizer state
  std::uint64_t parameters = 0;       // elements of the model's weights
  bool ok() const { return complete && !error; }
};

/// `path`: one checkpoint (a step-* folder, or any folder holding manifest.json), a
/// checkpoint.dir (step-* folders) or a run folder (checkpoints/): each checkpoint there,
/// newest first, verified (sizes, sha256, the shards' headers against the manifest).
/// InputError when `path` is none of these. `starting` (optional) is told of each
/// complete one before its shards are hashed: progress for folders of many gigabytes.
std::vector<CheckpointReport> verify_checkpoints(
    checkpoint::Filesystem& fs, const std::string& path,
    const std::function<void(const checkpoint::CheckpointFolder&)>& starting = {});

nlohmann::json reports_json(const std::vector<CheckpointReport>& reports);
std::string reports_text(const std::vector<CheckpointReport>& reports);

struct ExportedWeights {
  std::string from;        // the step folder exported
  std::int64_t step = 0;
  std::string out;
  std::size_t tensors = 0;
  std::uint64_t parameters = 0;
  std::uint64_t bytes = 0;  // of the file written
};

/// The checkpoint folder `file` would be written into: the nearest folder above it that
/// holds a manifest or is named like a step folder (step-N, also a staging one); nullopt
/// when there is none.
std::optional<std::string> checkpoint_folder_holding(const std::string& file);

/// The model weights (no optimizer state) of the verified checkpoint `point`
/// (resolve_resume's), f32, in model order: the manifest's model config's parameter
/// layout (shard order when it has none). Only the weights' bytes are read. InputError
/// when the shards hold other weights than that model's.
std::vector<NamedTensor> read_checkpoint_weights(const checkpoint::ResumePoint& point);

/// The weights of the checkpoint `path` names (as --resume resolves it: a step folder, or
/// the newest intact one of a checkpoint.dir or run folder) written to `out` atomically,
/// in model order (the manifest's model config; shard order when it has none). Only the
/// weights' bytes are read. With `bf16` every weight is rounded to bfloat16 (nearest even,
/// as the GPU rounds) for a file half the size. InputError when nothing intact is there,
/// `out` exists and `overwrite` is false, or `out` is inside the checkpoint's folder.
ExportedWeights export_weights(checkpoint::Filesystem& fs, const std::string& path, const std::string& out,
                               bool overwrite, bool bf16 = false);

}  // namespace conveyor
