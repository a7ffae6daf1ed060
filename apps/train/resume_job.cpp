#include "apps/train/resume_job.hpp"

#include <algorithm>
#include <optional>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "actors/checkpoint/checkpoint_error.hpp"
#include "actors/checkpoint/filesystem.hpp"
#include "actors/checkpoint/reader.hpp"
#include "actors/checkpoint/reshard.hpp"
#include "actors/checkpoint/resume.hpp"
#include "actors/plan/schedule/schedule.hpp"
#include "apps/config/config_loader.hpp"
#include "apps/train/model_match.hpp"
#include "apps/train/run_dir.hpp"
#include "apps/train/run_identity.hpp"
#include "kernels/model/param_state.hpp"
#include "kernels/common/error.hpp"
#include "kernels/model/param_layout.hpp"
#include "kernels/model/state_names.hpp"

namespace conveyor {
namespace {

// The run that wrote the checkpoint, from the config its manifest holds; nullopt for a
// checkpoint written without one (shapes and the seed then decide).
std::optional<RunConfig> written_config(const checkpoint::Manifest& m, const std::string& path) {
  if (m.config.empty()) return std::nullopt;
  try {
    return parse_run_config(YAML::Load(m.config), path + "/manifest.json \"config\"");
  } catch (const std::exception& e) {
    throw InputError(fmt::format("--resume {}: the manifest's config is not a conveyor config: {}",
                                 path, e.what()));
  }
}

// The checkpoint's model against this run's (model_match.hpp). Not even --force resumes
// another model.
void check_same_model(const GptConfig& then, const GptConfig& now, const std::string& path) {
  const auto diff = model_differences(then, now, "checkpoint", SeqLenRule::same);
  if (!diff.empty())
    throw InputError(fmt::format("--resume {}: the checkpoint holds another model: {}", path,
                                 fmt::join(diff, ", ")));
}

// The checkpoint against this run's identity (run_identity.hpp): another run's checkpoint
// in a shared folder must not be continued by mistake.
void check_same_run(const RunConfig& then, const RunConfig& now, const ResumeIdentity& who,
                    const std::string& path) {
  const auto diff = identity_differences(then, now);
  if (diff.empty()) return;
  throw InputError(fmt::format(
      "--resume {}: the checkpoint was written by another run than {}: {}; give --resume a "
      "checkpoint of this run, or add --force to continue it with this config",
      path, who.this_run, fmt::join(diff, ", ")));
}

}  // namespace

std::shared_ptr<const ResumeSource> load_resume(const std::string& arg,
                                                const std::string& checkpoint_dir,
                                                const RunConfig& config, const JobPlan& plan,
                                                const std::set<int>& here, const ResumeIdentity& who) {
  auto& fs = checkpoint::posix_filesystem();
  const checkpoint::ResumePoint point = checkpoint::resolve_resume(fs, arg, checkpoint_dir);
  auto out = std::make_shared<ResumeSource>();
  out->path = point.path;
  out->manifest = point.manifest;
  out->description = point.description;
  const auto& m = out->manifest;
  if (m.seed != config.train.seed && !who.force)
    throw InputError(fmt::format(
        "--resume {}: train.seed is {}, the checkpoint was written with {} (the data order "
        "and initialisation follow the seed: set --set train.seed={})",
        point.path, config.train.seed, m.seed, m.seed));
  const auto& names = sched::schedule_names();
  if (std::find(names.begin(), names.end(), m.schedule) == names.end())
    throw InputError(fmt::format("--resume {}: the manifest's schedule \"{}\" is not one of {}",
                                 point.path, m.schedule, fmt::join(names, ", ")));
  if (const auto then = written_config(m, point.path)) {
    check_same_model(then->model, config.model, point.path);
    if (!who.force) check_same_run(*then, config, who, point.path);
  }
  if (m.step >= config.train.steps)
    throw InputError(fmt::format(
        "--resume {}: train.steps is {}, the checkpoint already has {} steps (nothing left "
        "to train: raise train.steps)",
        point.path, config.train.steps, m.step));

  // This run's model stages, in model order, with the names and shapes they hold.
  out->slices.resize(static_cast<std::size_t>(plan.placement.model_stages()));
  for (const auto& rank : plan.placement.ranks)
    for (const auto& c : rank.chunks) out->slices.at(static_cast<std::size_t>(c.model_stage)) = c.slice;
  std::vector<std::vector<checkpoint::TensorSpec>> specs;
  for (const auto& slice : out->slices)
    specs.push_back(checkpoint::specs_of(stage_param_layout(plan.model, slice)));
  try {
    // resolve_resume verified every shard: from here on, headers, then this process's bytes.
    const auto index = checkpoint::index_checkpoint(point.path, m);
    // AdamW's moments come with every checkpoint conveyor writes after a step: without
    // them the run would restart its optimizer (t = 0) and not continue the one it resumes.
    const bool has_moments = std::any_of(index.tensors.begin(), index.tensors.end(), [](const auto& kv) {
      return std::string_view(kv.first).starts_with(kOptMPrefix);
    });
    if (m.optimizer_steps > 0 && !has_moments)
      throw checkpoint::CheckpointError(
          point.path, fmt::format("the manifest records {} optimizer steps but the shards hold no optimizer "
                                  "state ({}* and {}* tensors): resuming would restart AdamW",
                                  m.optimizer_steps, kOptMPrefix, kOptVPrefix));
    const auto plan = checkpoint::plan_reshard(index.tensors, specs, point.path);
    std::set<std::string> wanted;
    for (int s : here) wanted.insert(plan.at(static_cast<std::size_t>(s)).begin(), plan.at(static_cast<std::size_t>(s)).end());
    auto tensors = checkpoint::load_tensors(point.path, m, index, wanted);
    out->tensors.resize(plan.size());
    for (int s : here)
      for (const auto& name : plan.at(static_cast<std::size_t>(s)))
        out->tensors[static_cast<std::size_t>(s)].push_back({name, tensors.at(name)});
  } catch (const checkpoint::CheckpointError& e) {
    throw InputError(fmt::format("--resume {}: {}", arg, e.what()));
  }
  return out;
}

std::set<int> local_model_stages(const JobPlan& plan, const std::vector<int>& node_of_actor, int node) {
  std::set<int> out;
  for (std::size_t a = 0; a < node_of_actor.size(); ++a)
    if (node_of_actor[a] == node)
      for (const auto& c : plan.actor_placement(static_cast<int>(a)).chunks) out.insert(c.model_stage);
  return out;
}

void check_resume_continues(const std::filesystem::path& out, const std::string& step_folder) {
  namespace fs = std::filesystem;
  if (!fs::exists(out / "metrics.jsonl")) return;  // a new folder, or one without a run
  std::error_code ec;
  const fs::path from = fs::weakly_canonical(fs::path(step_folder).parent_path(), ec);
  std::vector<fs::path> own{fs::weakly_canonical(checkpoint_folder("", out), ec)};
  std::string recorded;
  try {
    recorded = load_run_config((out / "config.yaml").string()).checkpoint.dir;
  } catch (const std::exception&) {
    // No readable config.yaml: the run's own checkpoints/ is all that can be its.
  }
  if (!recorded.empty()) own.push_back(fs::weakly_canonical(recorded, ec));
  if (std::find(own.begin(), own.end(), from) != own.end()) return;
  throw InputError(fmt::format(
      "--out {}: already holds another run (metrics.jsonl), and --resume {} is not one of its "
      "checkpoints (those are in {}{}): give --out the run the checkpoint came from, or a new "
      "folder",
      out.string(), step_folder, checkpoint_folder("", out).string(),
      recorded.empty() ? "" : " or " + recorded));
}

StageModelFactory restoring_models(StageModelFactory make, std::shared_ptr<const ResumeSource> resume) {
  return [make, resume](const GptConfig& model, const StageSlice& slice, std::uint64_t seed,
                        Device device, float loss_scale) -> std::unique_ptr<StageModel> {
    auto m = make(model, slice, seed, device, loss_scale);
    if (!resume) return m;
    for (std::size_t s = 0; s < resume->slices.size(); ++s)
      if (resume->slices[s] == slice) {
        if (resume->tensors[s].empty())  // local_model_stages and the nodes' stages disagree
          throw std::logic_error(fmt::format("--resume {}: model stage {} was not loaded in this process",
                                             resume->path, s));
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
