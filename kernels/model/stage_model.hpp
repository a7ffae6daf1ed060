#pragma once
// What a stage actor computes with, whatever the device: one model chunk (a StageSlice)
// with its optimizer state. The CPU implementation wraps GptStage + AdamW; the CUDA one
// keeps everything in device memory. The stage logic above it never sees the device.
//
// Contract (same as GptStage): backward() == backward_input() then backward_weight();
// weight gradients accumulate in call order until optimizer_step() consumes and zeroes
// them; tensors handed in are never written and may be kept by handle until the
// micro-batch's backward is done (so a caller must not write them after handing them in:
// the runtime hands every activation and gradient over exactly once); tensors handed out
// are fresh.
#include <functional>
#include <memory>
#include <vector>

#include "kernels/io/safetensors.hpp"
#include "kernels/model/action_clock.hpp"
#include "kernels/model/gpt_stage.hpp"
#include "kernels/optim/adamw.hpp"

namespace conveyor {

class StageModel {
 public:
  virtual ~StageModel() = default;

  virtual StageForward forward(const Tensor& input, const Tensor& targets, bool keep_stash) = 0;
  virtual Tensor backward(StageStash& stash, const Tensor& grad_output, float loss_scale) = 0;
  virtual Tensor backward_input(StageStash& stash, const Tensor& grad_output,
                                float loss_scale) = 0;
  virtual void backward_weight(StageStash& stash) = 0;

  /// Sum of squared gradients per parameter, in parameter order (for the global norm).
  virtual std::vector<double> grad_squares() const = 0;
  /// AdamW on every parameter (grads scaled by grad_scale first), then zero the grads.
  virtual void optimizer_step(const AdamWConfig& config, double lr, float grad_scale) = 0;
  /// Zero the grads without an update (a skipped step): parameters, moments and the AdamW
  /// step count stay as they are.
  virtual void discard_gradients() = 0;
  /// Current parameters as host tensors with stage-independent names, in parameter order.
  virtual std::vector<NamedTensor> weights() const = 0;
  /// The device's own times for actions (tracing a GPU stage); null where the host clock
  /// around each call is already the truth (the CPU). Made on first use; owned by the model.
  virtual DeviceActionClock* action_clock() { return nullptr; }
};

/// Builds the model of one chunk; chosen by device when the job is built.
using StageModelFactory = std::function<std::unique_ptr<StageModel>(
    const GptConfig&, const StageSlice&, std::uint64_t seed, Device device)>;

/// The CPU reference: GptStage and fp32 AdamW in host memory.
/// REQUIRES: device is the CPU.
std::unique_ptr<StageModel> make_cpu_stage_model(const GptConfig& config, const StageSlice& slice,
                                                 std::uint64_t seed, Device device = Device::cpu());

}  // namespace conveyor
