#pragma once
// A chunk model whose training state a checkpoint can take and give back: the chunk's
// parameters, their AdamW moments (and, on a bf16 device, fp32 master weights) as host
// tensors under global names (actors/checkpoint/tensor_names.hpp). StageWorker asks a
// model for it with dynamic_cast; a model without it (a GPU one, today) cannot be
// checkpointed.
//
// The CPU implementation is CpuStageModel itself (kernels/model/cpu_stage_model.hpp) plus
// the two calls, so a run does not change its numbers by being checkpointable.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/model/cpu_stage_model.hpp"

namespace conveyor {

class StatefulStageModel {
 public:
  virtual ~StatefulStageModel() = default;
  /// Host copies (the caller may keep them while training goes on) of every parameter,
  /// then each one's opt.m / opt.v once the optimizer has taken a step.
  virtual std::vector<NamedTensor> capture_state() const = 0;
  /// Sets parameters and optimizer state from `tensors` (one chunk's share of a
  /// checkpoint, e.g. from reshard()), with AdamW's step count `optimizer_steps`.
  /// Throws CheckpointError(`where`, ...) before changing anything when a tensor is
  /// missing or of another shape.
  virtual void restore_state(const std::vector<NamedTensor>& tensors,
                             std::int64_t optimizer_steps, const std::string& where) = 0;
};

class StatefulCpuStageModel final : public CpuStageModel, public StatefulStageModel {
 public:
  using CpuStageModel::CpuStageModel;
  std::vector<NamedTensor> capture_state() const override;
  void restore_state(const std::vector<NamedTensor>& tensors, std::int64_t optimizer_steps,
                     const std::string& where) override;
};

/// The CPU chunk model with state access. REQUIRES: device is the CPU.
std::unique_ptr<StatefulCpuStageModel> make_stateful_cpu_stage_model(const GptConfig& config,
                                                                     const StageSlice& slice,
                                                                     std::uint64_t seed,
                                                                     Device device = Device::cpu());

}  // namespace conveyor
