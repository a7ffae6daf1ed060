#include "kernels/model/stage_model.hpp"

#include <stdexcept>

namespace conveyor {

std::vector<NamedTensor> StageModel::capture_state() const {
  throw std::logic_error("this stage model's training state cannot be captured");
}

void StageModel::restore_state(const std::vector<NamedTensor>& /*tensors*/,
                               std::int64_t /*optimizer_steps*/) {
  throw std::logic_error("this stage model's training state cannot be restored");
}

std::vector<Tensor> StageModel::gradients() {
  throw std::logic_error("this stage model's gradients cannot be averaged across replicas");
}

std::vector<GradientSpans> StageModel::gradient_buckets() {
  GradientSpans bucket;
  for (Tensor& g : gradients())
    bucket.push_back(GradientSpan{g.raw(), static_cast<std::size_t>(g.numel()), g.dtype()});
  return {std::move(bucket)};
}

void StageModel::notify_final_buckets(BucketFinal /*on_final*/) {}

void StageModel::shard_optimizer_state(int /*rank*/, int /*ranks*/) {
  throw std::logic_error("this stage model cannot shard its optimizer state (optim.shard_state)");
}

std::vector<GradientSpan> StageModel::parameter_spans() {
  throw std::logic_error("this stage model's parameters cannot be gathered across replicas");
}

std::shared_ptr<const StateSnapshot> StageModel::snapshot() const {
  return std::make_shared<TensorStateSnapshot>(capture_state(), optimizer_steps());
}

void StageModel::restore_snapshot(const StateSnapshot& snapshot) {
  restore_state(snapshot.tensors(), snapshot.optimizer_steps());
}

}  // namespace conveyor
