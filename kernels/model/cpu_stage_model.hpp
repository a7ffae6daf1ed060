#pragma once
// The CPU reference chunk model: GptStage (GPT-2 or Llama) and fp32 AdamW in host memory
// (make_cpu_stage_model returns one).
#include "kernels/model/gpt_stage.hpp"
#include "kernels/model/stage_model.hpp"
#include "kernels/optim/adamw.hpp"

namespace conveyor {

class CpuStageModel : public StageModel {
 public:
  CpuStageModel(const GptConfig& config, const StageSlice& slice, std::uint64_t seed);

  StageForward forward(const Tensor& input, const Tensor& targets, bool keep_stash) override;
  Tensor backward(StageStash& stash, const Tensor& grad_output, float loss_scale) override;
  Tensor backward_input(StageStash& stash, const Tensor& grad_output, float loss_scale) override;
  void backward_weight(StageStash& stash) override;
  std::vector<double> grad_squares() const override;
  std::vector<Tensor> gradients() override;
  std::vector<TiedGradient> tied_gradients() override;
  void shard_optimizer_state(int rank, int ranks) override;
  std::vector<GradientSpan> parameter_spans() override;
  void optimizer_step(const AdamWConfig& config, double lr, float grad_scale) override;
  void discard_gradients() override;
  std::vector<NamedTensor> weights() const override;
  std::vector<NamedTensor> capture_state() const override;
  std::int64_t optimizer_steps() const override { return optim_.t; }
  void restore_state(const std::vector<NamedTensor>& tensors, std::int64_t optimizer_steps) override;

 private:
  GptStage model_;
  AdamWState optim_;
};

}  // namespace conveyor
