#include "apps/hf/checkpoint_logits.hpp"

#include <cstring>
#include <memory>
#include <vector>
#include <fmt/format.h>
#include <stdexcept>

#include "apps/hf/model_weights.hpp"
#include "kernels/common/error.hpp"
#include "kernels/io/safetensors.hpp"

#if CONVEYOR_WITH_CUDA
#include "kernels/cuda/model/cuda_stage_model.hpp"
#endif

namespace conveyor {
namespace {

// The whole model as one CUDA stage holding `model`'s weights: its logits and loss.
StageLogits cuda_logits(CheckpointModel& model, const Tensor& inputs, const Tensor& targets,
                        int device) {
#if CONVEYOR_WITH_CUDA
  if (!cuda_device_available(device))
    throw InputError(fmt::format("--device cuda:{}: no such GPU on this machine (check nvidia-smi)", device));
  const StageSlice whole{0, static_cast<int>(model.model.layers), true, true};
  CudaStageOptions options;
  options.device = device;
  std::unique_ptr<StageModel> gpu;
  try {
    gpu = make_cuda_stage_model(model.model, whole, 0, options);
  } catch (const std::invalid_argument& e) {  // a shape the GPU kernels do not take
    throw InputError(fmt::format("--device cuda:{}: {}", device, e.what()));
  }
  std::vector<NamedTensor> weights;
  for (const Param& p : model.stage.params()) weights.push_back({p.name, p.value});
  gpu->restore_state(weights, 0);  // the fp32 master, and its bf16 compute copy
  return cuda_stage_logits(*gpu, inputs, targets);
#else
  (void)model, (void)inputs, (void)targets;
  throw InputError(fmt::format(
      "--device cuda:{}: this conveyor was built without CUDA (nvcc was not found)", device));
#endif
}

}  // namespace

CheckpointModel load_checkpoint_model(const std::string& path, const std::string& command) {
  ModelWeights w = read_model_weights(path, command);
  const StageSlice whole{0, static_cast<int>(w.model.layers), true, true};
  GptStage stage(w.model, whole, 0);  // initial values overwritten below
  // read_model_weights gives the whole model in this stage's parameter order, each checked
  // against its config; the names and shapes are checked here all the same.
  auto& params = stage.params();
  if (w.weights.size() != params.size())
    throw std::logic_error(fmt::format("hf logits {}: {} tensors for {} parameters", path, w.weights.size(),
                                       params.size()));
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Tensor& t = w.weights[i].tensor;
    if (w.weights[i].name != params[i].name || t.dtype() != DType::f32 || t.shape() != params[i].value.shape())
      throw std::logic_error(fmt::format("hf logits {}: tensor {} is {}, parameter {} needs {}", path,
                                         w.weights[i].name, t.describe(), params[i].name,
                                         params[i].value.describe()));
    std::memcpy(params[i].value.f32(), t.f32(), t.bytes());
  }
  return {w.path, source_name(w.source), w.step, w.model, std::move(stage)};
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

TokenLogits checkpoint_logits(CheckpointModel& model, const Tensor& tokens, const Device& device) {
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
    StageLogits out = device.is_cpu() ? model.stage.forward_logits(inputs, targets)
                                      : cuda_logits(model, inputs, targets, device.index);
    return {std::move(out.logits), out.loss};
  } catch (const std::invalid_argument& e) {  // an id outside the vocabulary
    throw InputError(std::string("tokens: ") + e.what());
  }
}

}  // namespace conveyor
