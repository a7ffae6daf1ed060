#include "apps/hf/model_weights.hpp"

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "actors/checkpoint/filesystem.hpp"
#include "actors/checkpoint/resume.hpp"
#include "apps/checkpoint/checkpoint_inspect.hpp"
#include "apps/config/config_loader.hpp"
#include "apps/train/run_dir.hpp"
#include "apps/train/weights_file.hpp"
#include "kernels/common/error.hpp"
#include "kernels/io/hf_folder.hpp"
#include "kernels/model/hf_weights.hpp"
#include "kernels/model/param_layout.hpp"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

// A config written by conveyor (a run's config.yaml, a manifest's "config") as the model.
GptConfig model_of(const std::string& yaml_text, const std::string& where) {
  try {
    return parse_run_config(YAML::Load(yaml_text), where).model;
  } catch (const std::exception& e) {
    throw InputError(fmt::format("{}: not a conveyor config: {}", where, e.what()));
  }
}

std::string file_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The last row of a run's metrics.jsonl (null when there is none or it is not JSON). The
// run ended when it is the summary, which is written after weights.safetensors; a run
// stopped or resumed since has other rows after it.
nlohmann::json last_row(const fs::path& run) {
  std::ifstream in(run / "metrics.jsonl");
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return nlohmann::json::parse(last, nullptr, /*allow_exceptions=*/false);
}

// `weights` in the whole model's layout order; InputError naming what differs.
std::vector<NamedTensor> in_model_order(std::vector<NamedTensor> weights, const GptConfig& model,
                                        const std::string& where) {
  std::map<std::string, Tensor> by_name;
  for (auto& w : weights) by_name.emplace(w.name, std::move(w.tensor));
  const StageSlice whole{0, static_cast<int>(model.layers), true, true};
  std::vector<NamedTensor> out;
  for (const auto& p : stage_param_layout(model, whole)) {
    const auto it = by_name.find(p.name);
    if (it == by_name.end()) throw InputError(fmt::format("{}: holds no {} (its config's model has it)", where, p.name));
    if (it->second.shape() != p.shape || it->second.dtype() != DType::f32)
      throw InputError(fmt::format("{}: {} is {}, its config's model needs f32 {}", where, p.name,
                                   it->second.describe(), p.shape.str()));
    out.push_back({p.name, std::move(it->second)});
    by_name.erase(it);
  }
  if (!by_name.empty())
    throw InputError(fmt::format("{}: holds {}, which its config's model has no place for", where,
                                 by_name.begin()->first));
  return out;
}

ModelWeights from_hf_folder(const std::string& path) {
  const HfFolder folder(path);
  HfWeights w = read_hf_weights(folder);
  ModelWeights out;
  out.source = ModelWeights::Source::hf_folder;
  out.path = path;
  out.model = w.config.model;
  out.weights = std::move(w.params);
  out.description = fmt::format("{} of the Hugging Face folder {}", w.config.architecture, path);
  return out;
}

ModelWeights from_checkpoint(const std::string& path, const std::string& flag) {
  const auto point = checkpoint::resolve_resume(checkpoint::posix_filesystem(), path, "", flag);
  if (point.manifest.config.empty())
    throw InputError(fmt::format("{} {}: the manifest of {} holds no config: its model is unknown", flag, path,
                                 point.path));
  ModelWeights out;
  out.source = ModelWeights::Source::checkpoint;
  out.path = point.path;
  out.step = point.manifest.step;
  out.model = model_of(point.manifest.config, point.path + "/manifest.json \"config\"");
  out.weights = read_checkpoint_weights(point);
  out.description = point.description;
  return out;
}

ModelWeights from_run(const fs::path& run, const std::string& flag) {
  const fs::path config_file = run / "config.yaml";
  if (!fs::is_regular_file(config_file))
    throw InputError(fmt::format("{} {}: a run folder without its config.yaml", flag, run.string()));
  const std::string config_text = file_text(config_file);
  const fs::path weights = run / kWeightsFile;
  const nlohmann::json last = last_row(run);
  if (last.is_object() && last.value("event", "") == "summary" && fs::is_regular_file(weights)) {
    ModelWeights out;
    out.source = ModelWeights::Source::run_weights;
    out.path = weights.string();
    out.model = model_of(config_text, config_file.string());
    out.weights = in_model_order(read_safetensors(weights.string()), out.model, weights.string());
    out.step = last.value("steps", std::int64_t{0});
    out.description = fmt::format("the final weights of the run {} ({} steps)", run.string(), out.step);
    return out;
  }
  // A run that has not ended: its newest checkpoint, wherever its config put them.
  std::string configured;
  try {
    configured = parse_run_config(YAML::Load(config_text), config_file.string()).checkpoint.dir;
  } catch (const std::exception&) {
    // Unreadable: the run's own checkpoints/ is all that can be its.
  }
  return from_checkpoint(checkpoint_folder(configured, run).string(), flag);
}

}  // namespace

const char* source_name(ModelWeights::Source source) {
  switch (source) {
    case ModelWeights::Source::hf_folder: return "hf_folder";
    case ModelWeights::Source::run_weights: return "run_weights";
    case ModelWeights::Source::checkpoint: return "checkpoint";
  }
  return "?";
}

ModelWeights read_model_weights(const std::string& path, const std::string& flag) {
  std::error_code ec;
  if (!fs::is_directory(path, ec))
    throw InputError(fmt::format("{} {}: no such folder", flag, path));
  if (fs::exists(fs::path(path) / kHfConfigFile, ec)) return from_hf_folder(path);
  if (fs::exists(fs::path(path) / "metrics.jsonl", ec)) return from_run(path, flag);
  return from_checkpoint(path, flag);
}

}  // namespace conveyor
