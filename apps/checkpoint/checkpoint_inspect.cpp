#include "apps/checkpoint/checkpoint_inspect.hpp"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <set>
#include <yaml-cpp/yaml.h>

#include "actors/checkpoint/checkpoint_error.hpp"
#include "actors/checkpoint/layout.hpp"
#include "actors/checkpoint/reader.hpp"
#include "actors/checkpoint/resume.hpp"
#include "apps/config/config_loader.hpp"
#include "apps/train/weights_file.hpp"
#include "kernels/common/error.hpp"
#include "kernels/model/param_layout.hpp"
#include "kernels/model/state_names.hpp"
#include "kernels/tensor/bf16_tensor.hpp"

namespace conveyor {
namespace {

std::string without_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// The step folders `path` stands for, newest first.
std::vector<checkpoint::CheckpointFolder> folders_at(checkpoint::Filesystem& fs, const std::string& arg) {
  const std::string path = without_trailing_slashes(arg);
  if (!fs.is_dir(path)) throw InputError(fmt::format("{}: {}", arg, fs.exists(path) ? "not a folder" : "no such folder"));
  const auto step = checkpoint::parse_step_dir_name(std::filesystem::path(path).filename().string());
  const bool has_manifest = fs.exists(path + "/" + checkpoint::kManifestFile);
  if (step || has_manifest) return {{step.value_or(-1), path, has_manifest}};
  const std::string dir = fs.is_dir(path + "/checkpoints") ? path + "/checkpoints" : path;
  auto all = checkpoint::list_checkpoints(fs, dir);
  if (all.empty())
    throw InputError(fmt::format("{}: holds no checkpoint (no {}, no step-* folders{})", arg, checkpoint::kManifestFile,
                                 dir == path ? ", no checkpoints/" : " in checkpoints/"));
  std::reverse(all.begin(), all.end());
  return all;
}

CheckpointReport report_on(checkpoint::Filesystem& fs, const checkpoint::CheckpointFolder& folder) {
  CheckpointReport r;
  r.path = folder.path;
  r.step = folder.step;
  r.complete = folder.complete;
  if (!r.complete) return r;
  try {
    auto m = checkpoint::verify_checkpoint(fs, folder.path);
    if (folder.step >= 0 && m.step != folder.step)
      throw checkpoint::CheckpointError(folder.path, fmt::format("its manifest.json says step {}, the folder's name step {}",
                                                                 m.step, folder.step));
    const auto index = checkpoint::index_checkpoint(folder.path, m);
    r.step = m.step;
    for (const auto& shard : m.shards) r.bytes += shard.bytes;
    r.tensors = index.tensors.size();
    for (const auto& [name, spec] : index.tensors)
      if (!is_state_name(name)) r.parameters += static_cast<std::uint64_t>(spec.shape.numel());
    r.manifest = std::move(m);
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

// Checkpoints hold f32 (capture_state).
std::string gigabytes(std::uint64_t bytes) { return fmt::format("{:.2f} GB", static_cast<double>(bytes) / 1e9); }
std::string millions(std::uint64_t n) { return fmt::format("{:.1f}M", static_cast<double>(n) / 1e6); }

// The checkpoint's weights in model order: the whole model's parameter layout under the
// manifest's config, which must name exactly the weights the shards hold.
std::vector<std::string> weight_order(const checkpoint::Manifest& m, const checkpoint::CheckpointIndex& index,
                                      const std::string& path) {
  std::set<std::string> held;
  for (const auto& [name, spec] : index.tensors)
    if (!is_state_name(name)) held.insert(name);
  std::vector<std::string> order;
  if (m.config.empty()) {  // written without its config: stage, then file order
    auto shards = m.shards;
    std::stable_sort(shards.begin(), shards.end(), [](const auto& a, const auto& b) { return a.stage < b.stage; });
    for (const auto& shard : shards)
      for (const auto& name : shard.tensors)
        if (!is_state_name(name)) order.push_back(name);
    return order;
  }
  GptConfig model;
  try {
    model = parse_run_config(YAML::Load(m.config), path + "/manifest.json \"config\"").model;
  } catch (const std::exception& e) {
    throw InputError(fmt::format("{}: the manifest's config is not a conveyor config: {}", path, e.what()));
  }
  const StageSlice whole{0, static_cast<int>(model.layers), true, true};
  for (const auto& p : stage_param_layout(model, whole)) order.push_back(p.name);
  if (std::set<std::string>(order.begin(), order.end()) != held || order.size() != held.size())
    throw InputError(fmt::format("{}: its shards hold {} weights, the model of its manifest's config has {} others",
                                 path, held.size(), order.size()));
  return order;
}

}  // namespace

std::vector<CheckpointReport> verify_checkpoints(
    checkpoint::Filesystem& fs, const std::string& path,
    const std::function<void(const checkpoint::CheckpointFolder&)>& starting) {
  std::vector<CheckpointReport> out;
  for (const auto& folder : folders_at(fs, path)) {
    if (starting && folder.complete) starting(folder);
    out.push_back(report_on(fs, folder));
  }
  return out;
}

nlohmann::json reports_json(const std::vector<CheckpointReport>& reports) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : reports) {
    nlohmann::json j = {{"path", r.path},      {"step", r.step},       {"complete", r.complete},
                        {"ok", r.ok()},        {"error", nullptr},     {"bytes", r.bytes},
                        {"tensors", r.tensors}, {"parameters", r.parameters}};
    if (r.error) j["error"] = *r.error;
    if (r.manifest) {
      j["optimizer_steps"] = r.manifest->optimizer_steps;
      j["schedule"] = r.manifest->schedule;
      j["stages"] = r.manifest->stages;
      j["shards"] = r.manifest->shards.size();
    }
    list.push_back(std::move(j));
  }
  const bool ok = std::any_of(reports.begin(), reports.end(), [](const auto& r) { return r.ok(); }) &&
                  std::none_of(reports.begin(), reports.end(), [](const auto& r) { return r.complete && r.error; });
  return {{"ok", ok}, {"checkpoints", list}};
}

std::string reports_text(const std::vector<CheckpointReport>& reports) {
  std::string out;
  int intact = 0, failed = 0, incomplete = 0;
  for (const auto& r : reports) {
    if (!r.complete) {
      ++incomplete;
      out += fmt::format("{}  incomplete: no {} (its write did not finish; resumes ignore it)\n", r.path,
                         checkpoint::kManifestFile);
    } else if (r.error) {
      ++failed;
      out += fmt::format("{}  FAILED: {}\n", r.path, *r.error);
    } else {
      ++intact;
      const auto& m = *r.manifest;
      out += fmt::format("{}  ok: step {}, {} parameters ({} tensors with optimizer state), {} in {} shard(s), "
                         "{} on {} stage(s)\n",
                         r.path, r.step, millions(r.parameters), r.tensors, gigabytes(r.bytes), m.shards.size(),
                         m.schedule, m.stages);
    }
  }
  out += fmt::format("{} checkpoint(s): {} intact, {} failed verification, {} incomplete\n", reports.size(), intact,
                     failed, incomplete);
  return out;
}

std::optional<std::string> checkpoint_folder_holding(const std::string& file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // Links and dots resolved: a checkpoint reached through a link is still one.
  fs::path folder = fs::weakly_canonical(fs::absolute(file, ec).parent_path(), ec);
  if (ec) return std::nullopt;
  for (;; folder = folder.parent_path()) {
    const std::string name = folder.filename().string();
    if (checkpoint::parse_step_dir_name(name) ||
        fs::exists(folder / checkpoint::kManifestFile, ec))
      return folder.string();
    if (folder == folder.parent_path()) return std::nullopt;
  }
}

std::vector<NamedTensor> read_checkpoint_weights(const checkpoint::ResumePoint& point) {
  const auto index = checkpoint::index_checkpoint(point.path, point.manifest);
  const auto order = weight_order(point.manifest, index, point.path);
  auto loaded = checkpoint::load_tensors(point.path, point.manifest, index, {order.begin(), order.end()});
  std::vector<NamedTensor> weights;
  for (const auto& name : order) weights.push_back({name, std::move(loaded.at(name))});
  return weights;
}

ExportedWeights export_weights(checkpoint::Filesystem& fs, const std::string& path, const std::string& out,
                               bool overwrite, bool bf16) {
  const std::string flag = "checkpoint export";
  if (path == "latest")
    throw InputError(flag + ": give a folder (a step-* folder, a checkpoint.dir or a run folder), not 'latest'");
  const auto point = checkpoint::resolve_resume(fs, path, "", flag);
  // Nothing is written into a checkpoint, this one or any other: its files are immutable
  // once its manifest exists (docs/CHECKPOINTS.md).
  if (const auto inside = checkpoint_folder_holding(out))
    throw InputError(fmt::format("--out {}: is inside the checkpoint folder {}: nothing is ever written into a "
                                 "checkpoint; choose a file elsewhere",
                                 out, *inside));
  if (std::filesystem::exists(out) && !overwrite)
    throw InputError(fmt::format("--out {}: already exists (--force replaces it)", out));
  auto weights = read_checkpoint_weights(point);
  ExportedWeights result{point.path, point.manifest.step, out, weights.size()};
  for (auto& w : weights) {
    result.parameters += static_cast<std::uint64_t>(w.tensor.numel());
    if (bf16) w.tensor = to_bf16(w.tensor);
  }
  try {
    write_weights_file(out, weights);
  } catch (const std::runtime_error& e) {
    throw InputError(fmt::format("--out {}: {}", out, e.what()));
  }
  result.bytes = std::filesystem::file_size(out);
  return result;
}

}  // namespace conveyor
