#include "apps/train/resume_job.hpp"

#include <fmt/format.h>

#include "actors/checkpoint/checkpoint_error.hpp"
#include "actors/checkpoint/filesystem.hpp"
#include "actors/checkpoint/reader.hpp"
#include "actors/checkpoint/reshard.hpp"
#include "actors/checkpoint/resume.hpp"
#include "kernels/model/param_state.hpp"
#include "kernels/common/error.hpp"
#include "kernels/model/gpt_stage.hpp"

namespace conveyor {

std::shared_ptr<const ResumeSource> load_resume(const std::string& arg,
                                                const std::string& checkpoint_dir,
                                                const RunConfig& config, const TrainingJob& job) {
  auto& fs = checkpoint::posix_filesystem();
  const checkpoint::ResumePoint point = checkpoint::resolve_resume(fs, arg, checkpoint_dir);
  auto out = std::make_shared<ResumeSource>();
  out->path = point.path;
  out->manifest = point.manifest;
  out->description = point.description;
  const auto& m = out->manifest;
  if (m.seed != config.train.seed)
    throw InputError(fmt::format(
        "--resume {}: train.seed is {}, the checkpoint was written with {} (the data order "
        "and initialisation follow the seed: set --set train.seed={})",
        point.path, config.train.seed, m.seed, m.seed));
  if (m.step >= config.train.steps)
    throw InputError(fmt::format(
        "--resume {}: train.steps is {}, the checkpoint already has {} steps (nothing left "
        "to train: raise train.steps)",
        point.path, config.train.steps, m.step));

  // This run's model stages, in model order, with the names and shapes they hold.
  out->slices.resize(static_cast<std::size_t>(job.placement.model_stages()));
  for (const auto& rank : job.placement.ranks)
    for (const auto& c : rank.chunks) out->slices.at(static_cast<std::size_t>(c.model_stage)) = c.slice;
  std::vector<std::vector<checkpoint::TensorSpec>> specs;
  for (const auto& slice : out->slices)
    specs.push_back(checkpoint::specs_of(GptStage(job.model, slice, job.data.seed).params()));
  try {
    auto loaded = checkpoint::load_checkpoint(fs, point.path);
    out->tensors = checkpoint::reshard(loaded.tensors, specs, point.path);
  } catch (const checkpoint::CheckpointError& e) {
    throw InputError(fmt::format("--resume {}: {}", arg, e.what()));
  }
  return out;
}

StageModelFactory restoring_models(StageModelFactory make, std::shared_ptr<const ResumeSource> resume) {
  return [make, resume](const GptConfig& model, const StageSlice& slice, std::uint64_t seed,
                        Device device) -> std::unique_ptr<StageModel> {
    auto m = make(model, slice, seed, device);
    if (!resume) return m;
    for (std::size_t s = 0; s < resume->slices.size(); ++s)
      if (resume->slices[s] == slice) {
        try {
          m->restore_state(resume->tensors[s], resume->manifest.optimizer_steps);
        } catch (const StateMismatch& e) {
          throw checkpoint::CheckpointError(resume->path, e.what());
        }
        return m;
      }
    throw std::logic_error(fmt::format("--resume {}: no tensors for half blocks [{}, {})",
                                       resume->path, slice.first_half(), slice.end_half()));
  };
}

}  // namespace conveyor
