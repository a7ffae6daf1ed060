#pragma once
// Where checkpoints live:
//   <checkpoint.dir>/step-000123/manifest.json
//   <checkpoint.dir>/step-000123/stage-0.safetensors, stage-1.safetensors, ...
// A step folder is complete when it holds manifest.json: the manifest is written last,
// so a folder without one is an unfinished write and is ignored (and removed by the next
// successful write). Names starting with '.' are temporary files of a write in progress.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/checkpoint/filesystem.hpp"

namespace conveyor::checkpoint {

/// "step-000123": at least 6 digits, so names sort like steps up to step 999999.
std::string step_dir_name(std::int64_t step);
/// The step of a "step-<digits>" name; nullopt for any other name.
std::optional<std::int64_t> parse_step_dir_name(std::string_view name);
/// "stage-3.safetensors".
std::string shard_file_name(int stage);
/// A unique temporary name for `final_name` in the same folder: ".<final>.tmp-<pid>-<n>".
std::string temp_file_name(const std::string& final_name);
/// The step of the step folder holding `path` when `path` is a temporary file of
/// `final_name` (temp_file_name) there; nullopt otherwise. Fault injection finds the file
/// of a checkpoint it acts on by it (corrupting_filesystem.hpp, stalling_filesystem.hpp).
std::optional<std::int64_t> temp_file_step(const std::string& path, const std::string& final_name);

struct CheckpointFolder {
  std::int64_t step = 0;
  std::string path;
  bool complete = false;  // holds manifest.json
};

/// Every step folder under `checkpoint_dir`, by ascending step; empty when the folder
/// does not exist. Says nothing of whether a complete one verifies (see reader.hpp).
std::vector<CheckpointFolder> list_checkpoints(Filesystem& fs, const std::string& checkpoint_dir);

}  // namespace conveyor::checkpoint
