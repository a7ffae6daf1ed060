#pragma once
// `conveyor train --resume ARG`: which checkpoint (actors/checkpoint/resume.hpp), checked
// against the run about to start, loaded, and split over this run's model stages, which
// may be more or fewer than the checkpoint's (reshard.hpp). The stage models are then
// built from it (restoring_stage_models) instead of from their initialisation.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "actors/checkpoint/manifest.hpp"
#include "actors/runtime/training_job.hpp"
#include "apps/config/run_config.hpp"

namespace conveyor {

struct ResumeSource {
  std::string path;          // the step folder loaded
  checkpoint::Manifest manifest;
  std::string description;   // what was chosen and what was skipped, for the log
  std::vector<StageSlice> slices;                      // by model stage of this run
  std::vector<std::vector<NamedTensor>> tensors;       // by model stage: reshard()'s result
};

/// Resolves ARG (latest, a run folder, a checkpoint.dir, a step folder) under
/// `checkpoint_dir`, verifies and loads it for `job`. Throws InputError (exit 2) naming
/// --resume and the reason: nothing usable, another model (missing, extra or reshaped
/// tensors, or another model.* shape or tying in the manifest's config), another
/// train.seed (the data order would differ), or train.steps not beyond the checkpoint's
/// step.
std::shared_ptr<const ResumeSource> load_resume(const std::string& arg,
                                                const std::string& checkpoint_dir,
                                                const RunConfig& config, const TrainingJob& job);

/// A resumed run appends to --out's metrics.jsonl: when `out` already holds a run, the
/// checkpoint at `step_folder` must be one of that run's own (in out/checkpoints, or in the
/// checkpoint.dir its config.yaml names), else InputError: resuming would mix two runs'
/// metrics and overwrite the other's weights.
void check_resume_continues(const std::filesystem::path& out, const std::string& step_folder);

/// Stage models made by `make` (CPU or GPU), each restored from `resume` when it is not
/// null (with AdamW's step count of the checkpoint).
StageModelFactory restoring_models(StageModelFactory make, std::shared_ptr<const ResumeSource> resume);

}  // namespace conveyor
