#include "kernels/model/cpu_stage_model.hpp"

#include <stdexcept>

#include "kernels/model/param_state.hpp"

namespace conveyor {

CpuStageModel::CpuStageModel(const GptConfig& config, const StageSlice& slice, std::uint64_t seed)
    : model_(config, slice, seed) {}

StageForward CpuStageModel::forward(const Tensor& input, const Tensor& targets, bool keep_stash) {
  return model_.forward(input, targets, keep_stash);
}

Tensor CpuStageModel::backward(StageStash& stash, const Tensor& grad_output, float loss_scale) {
  return model_.backward(stash, grad_output, loss_scale);
}

Tensor CpuStageModel::backward_input(StageStash& stash, const Tensor& grad_output,
                                     float loss_scale) {
  return model_.backward_input(stash, grad_output, loss_scale);
}

void CpuStageModel::backward_weight(StageStash& stash) { model_.backward_weight(stash); }

std::vector<double> CpuStageModel::grad_squares() const {
  std::vector<double> squares;
  for (const auto& p : model_.params()) squares.push_back(grad_square_sum(p));
  return squares;
}

std::vector<Tensor> CpuStageModel::gradients() {
  std::vector<Tensor> grads;
  for (const auto& p : model_.params()) grads.push_back(p.grad);
  return grads;
}

std::vector<TiedGradient> CpuStageModel::tied_gradients() {
  if (!model_.config().tie_embeddings) return {};
  auto& params = model_.params();
  return find_tied_gradients(
      params.size(), [&](std::size_t i) -> const std::string& { return params[i].name; },
      [&](std::size_t i) {
        Tensor& g = params[i].grad;
        return GradientSpan{g.raw(), static_cast<std::size_t>(g.numel()), g.dtype()};
      });
}

void CpuStageModel::shard_optimizer_state(int rank, int ranks) {
  std::optional<ElementRange> shard;
  if (ranks > 1) shard = replica_shard(flat_size(model_.params()), rank, ranks);
  if (shard == optim_.shard) return;
  if (optim_.m.empty()) {
    optim_.shard = shard;
    return;
  }
  // A sharded state holds no other moments to widen or move to: those are on
  // the other replicas (restore a checkpoint or snapshot instead).
  if (optim_.shard)
    throw std::logic_error(
        "shard_optimizer_state: the optimizer state is already sharded; "
        "its other moments are on the other replicas");
  // Whole moments: cut to the shard through their captured form.
  const auto whole = capture_param_state(model_.params(), optim_);
  optim_.shard = shard;
  restore_param_state(whole, model_.params(), optim_, optim_.t);
}

std::vector<GradientSpan> CpuStageModel::parameter_spans() {
  std::vector<GradientSpan> spans;
  for (auto& p : model_.params())
    spans.push_back(
        GradientSpan{p.value.raw(), static_cast<std::size_t>(p.value.numel()), p.value.dtype()});
  return spans;
}

void CpuStageModel::optimizer_step(const AdamWConfig& config, double lr, float grad_scale) {
  adamw_step(model_.params(), optim_, config, static_cast<float>(lr), grad_scale);
  model_.zero_grads();
}

void CpuStageModel::discard_gradients() { model_.zero_grads(); }

std::vector<NamedTensor> CpuStageModel::weights() const {
  std::vector<NamedTensor> out;
  for (const auto& p : model_.params()) out.push_back(NamedTensor{p.name, p.value});
  return out;
}

std::vector<NamedTensor> CpuStageModel::capture_state() const {
  return capture_param_state(model_.params(), optim_);
}

void CpuStageModel::restore_state(const std::vector<NamedTensor>& tensors,
                                  std::int64_t optimizer_steps) {
  restore_param_state(tensors, model_.params(), optim_, optimizer_steps);
  model_.zero_grads();
}

std::unique_ptr<StageModel> make_cpu_stage_model(const GptConfig& config, const StageSlice& slice,
                                                 std::uint64_t seed, Device device, float /*loss_scale*/) {
  if (!device.is_cpu())
    throw std::invalid_argument("make_cpu_stage_model: device " + device.str() + " is not the CPU");
  return std::make_unique<CpuStageModel>(config, slice, seed);
}

}  // namespace conveyor
