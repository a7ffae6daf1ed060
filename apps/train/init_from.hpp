#pragma once
// `conveyor train --init-from PATH`: a new run (step 0, AdamW's moments zero, the data
// order of this config's train.seed) whose stage models start from the weights PATH holds
// (apps/hf/model_weights.hpp: a Hugging Face folder, read as `hf import` reads it; a run
// folder; a checkpoint, of which only the weights are used) instead of their
// initialisation: fine-tuning. The weights are whole-model, per-parameter, so any stage
// count, partition and schedule takes them: each model stage gets its slice's parameters
// (GPT-2's wpe cut to this run's seq_len). They come as a ResumeSource at step 0 with no
// optimizer steps, so restoring_models (resume_job.hpp) loads them as it loads a resume.
#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "actors/plan/job_plan.hpp"
#include "apps/config/run_config.hpp"
#include "apps/train/resume_job.hpp"

namespace conveyor {

struct InitFrom {
  std::shared_ptr<const ResumeSource> stages;  // step 0, optimizer_steps 0; path: what was read
  std::string source;                          // source_name(): hf_folder, run_weights, checkpoint
  std::int64_t weights_step = 0;               // training steps behind the weights
};

/// Reads PATH and checks its model against `config`'s (model_match.hpp, SeqLenRule::fits_in):
/// InputError naming --init-from, each key that differs and both values. Tensors are
/// kept for the model stages in `here` only (local_model_stages).
InitFrom load_init_from(const std::string& path, const RunConfig& config, const JobPlan& plan,
                        const std::set<int>& here);

}  // namespace conveyor
