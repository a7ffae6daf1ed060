#pragma once
// Which checkpoint `--resume ARG` means.
//   --resume latest       the newest complete checkpoint under `checkpoint_dir`
//   --resume RUN_DIR      a run folder holding checkpoints/: its newest
//   --resume CKPT_DIR     a folder holding step-* folders (a checkpoint.dir): its newest
//   --resume STEP_DIR     one checkpoint (a step-* folder, or any folder with manifest.json)
// Candidates are tried newest first and each is verified (manifest, sizes, sha256). One
// that fails verification is skipped for the next older complete one in the same folder
// (for STEP_DIR: the older ones beside it), and the description says which were skipped
// and why. Incomplete folders (no manifest) are never candidates.
#include <string>
#include <vector>

#include "actors/checkpoint/filesystem.hpp"
#include "actors/checkpoint/manifest.hpp"

namespace conveyor::checkpoint {

struct ResumePoint {
  std::string path;          // the step folder to load
  Manifest manifest;         // verified
  std::string description;   // one or more lines for the caller to log
  std::vector<std::string> skipped;  // "<path>: <reason>" of each newer one not used
};

/// Throws InputError (kernels/common/error.hpp) naming `flag` (the option or command that
/// gave ARG), ARG or the folder when nothing usable is found, with the reason of every
/// candidate that failed.
ResumePoint resolve_resume(Filesystem& fs, const std::string& arg, const std::string& checkpoint_dir,
                           const std::string& flag = "--resume");

}  // namespace conveyor::checkpoint
