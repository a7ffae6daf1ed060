#pragma once
// `conveyor checkpoint diff A B`: where two runs' states part. A and B are checkpoints (a
// step folder, or the newest intact one of a checkpoint.dir or run folder) or weights
// files (weights.safetensors, an export). Tensors are matched by global name and compared
// bit for bit; a tensor that differs reports how many elements differ and the largest
// |a - b|. One shard of A and its counterparts in B are held at a time, not two models.
// For the runtime's promise that the same config and seed give the same bits: the first
// tensor listed is where to look.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/checkpoint/filesystem.hpp"

namespace conveyor {

struct TensorDifference {
  std::string name;
  std::string kind;               // "values", "shape", "dtype", "only in A", "only in B"
  std::string detail;             // "shape", "dtype": both sides' ("(4, 8) in A, (8, 4) in B")
  std::int64_t elements = 0;      // "values": elements whose bits differ
  std::int64_t of = 0;            // "values": elements compared
  double max_abs = 0.0;           // "values": largest |a - b| (NaN when one side is NaN)
};

struct CheckpointDiff {
  std::string a, b;               // what each side resolved to (a step folder or a file)
  std::int64_t step_a = -1, step_b = -1;  // -1 for a weights file
  std::size_t tensors = 0;        // names in A or B
  bool weights_only = false;      // a side is a weights file: opt.* and master.* not compared
  std::vector<TensorDifference> differences;  // in A's order, then B's extras
  bool identical() const { return differences.empty(); }
};

/// InputError when a side is not a checkpoint or safetensors file (named as the command
/// names it); CheckpointError when a checkpoint fails verification.
CheckpointDiff diff_checkpoints(checkpoint::Filesystem& fs, const std::string& a, const std::string& b);

nlohmann::json diff_json(const CheckpointDiff& diff);
std::string diff_text(const CheckpointDiff& diff);

}  // namespace conveyor
