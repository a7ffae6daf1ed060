#pragma once
// `conveyor train --resume ARG`: which checkpoint (actors/checkpoint/resume.hpp), checked
// against the run about to start, loaded, and split over this run's model stages, which
// may be more or fewer than the checkpoint's (reshard.hpp). The stage models are then
// built from it (restoring_stage_models) instead of from their initialisation.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "actors/checkpoint/manifest.hpp"
#include "actors/plan/job_plan.hpp"
#include "apps/config/run_config.hpp"

namespace conveyor {

struct ResumeSource {
  std::string path;          // the step folder loaded
  checkpoint::Manifest manifest;
  std::string description;   // what was chosen and what was skipped, for the log
  std::vector<StageSlice> slices;                      // by model stage of this run
  /// By model stage, in reshard()'s order; empty for a stage this process does not build.
  std::vector<std::vector<NamedTensor>> tensors;
};

/// Whose checkpoint a resume may load: this run's (run_identity.hpp), or, with --force,
/// any of the same model.
struct ResumeIdentity {
  std::string this_run;  // for messages: "--out runs/a" or "this config"
  bool force = false;    // --force: another run's identity (or seed) is accepted
};

/// Resolves ARG (latest, a run folder, a checkpoint.dir, a step folder) under
/// `checkpoint_dir`, verifies and loads it for `job`. Throws InputError (exit 2) naming
/// --resume and the reason: nothing usable, another model (missing, extra or reshaped
/// tensors, or another model.* shape or tying in the manifest's config), another
/// train.seed (the data order would differ), another run's identity (run_identity.hpp;
/// these two pass with who.force), or train.steps not beyond the checkpoint's step. The whole checkpoint is verified (every shard's sha256, once) and checked against
/// every model stage of the job; tensor bytes are read for `here` only: the model stages
/// this process builds (local_model_stages).
std::shared_ptr<const ResumeSource> load_resume(const std::string& arg,
                                                const std::string& checkpoint_dir,
                                                const RunConfig& config, const JobPlan& plan,
                                                const std::set<int>& here, const ResumeIdentity& who);

/// The model stages that node `node` builds, for any replica, given every stage actor's
/// node (apps/launch/replica_nodes.hpp); all of them for a job of one process.
std::set<int> local_model_stages(const JobPlan& plan, const std::vector<int>& node_of_actor, int node);

/// A resumed run appends to --out's metrics.jsonl: when `out` already holds a run, the
/// checkpoint at `step_folder` must be one of that run's own (in out/checkpoints, or in the
/// checkpoint.dir its config.yaml names), else InputError: resuming would mix two runs'
/// metrics and overwrite the other's weights.
void check_resume_continues(const std::filesystem::path& out, const std::string& step_folder);

/// Stage models made by `make` (CPU or GPU), each restored from `resume` when it is not
/// null (with AdamW's step count of the checkpoint).
StageModelFactory restoring_models(StageModelFactory make, std::shared_ptr<const ResumeSource> resume);

}  // namespace conveyor
