#include "apps/hf/checkpoint_logits.hpp"

#include <cstring>
#include <fmt/format.h>
#include <map>
#include <set>
#include <stdexcept>
#include <yaml-cpp/yaml.h>

#include "actors/checkpoint/checkpoint_error.hpp"
#include "actors/checkpoint/filesystem.hpp"
#include "actors/checkpoint/reader.hpp"
#include "actors/checkpoint/reshard.hpp"
#include "actors/checkpoint/resume.hpp"
#include "apps/config/config_loader.hpp"
#include "kernels/common/error.hpp"
#include "kernels/io/safetensors.hpp"
#include "kernels/model/param_layout.hpp"

namespace conveyor {
namespace {

// The whole model: what a one-stage pipeline holds.
StageSlice whole_model(const GptConfig& m) { return {0, static_cast<int>(m.layers), true, true}; }

GptConfig written_model(const checkpoint::Manifest& m, const std::string& path) {
  if (m.config.empty())
    throw InputError(fmt::format("{}: the manifest holds no config, so the model's shape is unknown", path));
  try {
    return parse_run_config(YAML::Load(m.config), path + "/manifest.json \"config\"").model;
  } catch (const std::exception& e) {
    throw InputError(fmt::format("{}: the manifest's config is not a conveyor config: {}", path, e.what()));
  }
}

// Copies the checkpoint's parameters into `stage`. plan_reshard has checked that the
// checkpoint holds exactly this model's tensors, each of its shape.
void load_parameters(GptStage& stage, const std::string& step_dir, const checkpoint::Manifest& m) {
  const auto index = checkpoint::index_checkpoint(step_dir, m);
  checkpoint::plan_reshard(index.tensors, {checkpoint::specs_of(stage.params())}, step_dir);
  std::set<std::string> names;
  for (const Param& p : stage.params()) names.insert(p.name);
  const std::map<std::string, Tensor> tensors = checkpoint::load_tensors(step_dir, m, index, names);
  for (Param& p : stage.params()) {
    const Tensor& t = tensors.at(p.name);
    if (t.dtype() != DType::f32 || t.shape() != p.value.shape())
      throw checkpoint::CheckpointError(step_dir, p.name + " is " + t.describe() + ", the model needs " +
                                                      p.value.describe());
    std::memcpy(p.value.f32(), t.f32(), p.value.bytes());
  }
}

}  // namespace

CheckpointModel load_checkpoint_model(const std::string& arg) {
  auto& files = checkpoint::posix_filesystem();
  const checkpoint::ResumePoint point = checkpoint::resolve_resume(files, arg, "", "hf logits");
  const GptConfig model = written_model(point.manifest, point.path);
  GptStage stage(model, whole_model(model), point.manifest.seed);  // weights overwritten below
  try {
    load_parameters(stage, point.path, point.manifest);
  } catch (const checkpoint::CheckpointError& e) {
    throw InputError(fmt::format("{}: {}", arg, e.what()));
  }
  return {point.path, point.manifest.step, model, std::move(stage)};
}

Tensor read_token_rows(const std::string& path) {
  std::string names;
  for (auto& t : read_safetensors(path)) {
    if (t.name == "tokens") {
      if (t.tensor.dtype() != DType::i32 || t.tensor.shape().dims().size() != 2)
        throw InputError(fmt::format("{}: \"tokens\" must be i32 (B, T + 1), got {}", path, t.tensor.describe()));
      return t.tensor;
    }
    names += (names.empty() ? "" : ", ") + t.name;
  }
  throw InputError(fmt::format("{}: no tensor \"tokens\" (i32 (B, T + 1)); it holds: {}", path,
                               names.empty() ? "nothing" : names));
}

TokenLogits checkpoint_logits(CheckpointModel& model, const Tensor& tokens) {
  const auto& d = tokens.shape().dims();
  if (!tokens.defined() || tokens.dtype() != DType::i32 || d.size() != 2 || d[0] < 1 || d[1] < 2)
    throw InputError("tokens must be i32 (B, T + 1) with B >= 1 and T >= 1, got " + tokens.describe());
  const std::int64_t B = d[0], T = d[1] - 1;
  if (T > model.model.seq_len)
    throw InputError(fmt::format("tokens: rows of {} ids read {} positions, beyond the model's seq_len {}", T + 1,
                                 T, model.model.seq_len));
  Tensor inputs = Tensor::uninitialized({B, T}, DType::i32);
  Tensor targets = Tensor::uninitialized({B, T}, DType::i32);
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int32_t* row = tokens.i32() + b * (T + 1);
    std::memcpy(inputs.i32() + b * T, row, sizeof(std::int32_t) * static_cast<std::size_t>(T));
    std::memcpy(targets.i32() + b * T, row + 1, sizeof(std::int32_t) * static_cast<std::size_t>(T));
  }
  try {
    StageLogits out = model.stage.forward_logits(inputs, targets);
    return {std::move(out.logits), out.loss};
  } catch (const std::invalid_argument& e) {  // an id outside the vocabulary
    throw InputError(std::string("tokens: ") + e.what());
  }
}

}  // namespace conveyor
