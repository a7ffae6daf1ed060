#include "actors/runtime/empty_stage_model.hpp"

namespace conveyor {
namespace {

struct EmptyStash final : StageStash {
  std::size_t bytes() const override { return 0; }
};

class EmptyStageModel final : public StageModel {
 public:
  EmptyStageModel(const GptConfig& config, const StageSlice& slice, std::int64_t batch)
      : slice_(slice), activation_(Tensor::zeros({batch, config.seq_len, config.d_model})) {}

  StageForward forward(const Tensor&, const Tensor&, bool keep_stash) override {
    StageForward out;
    if (!slice_.has_head) out.activation = activation_;
    if (keep_stash) out.stash = std::make_unique<EmptyStash>();
    return out;
  }
  Tensor backward(StageStash&, const Tensor&, float) override { return grad(); }
  Tensor backward_input(StageStash&, const Tensor&, float) override { return grad(); }
  void backward_weight(StageStash&) override {}
  std::vector<double> grad_squares() const override { return {}; }
  void optimizer_step(const AdamWConfig&, double, float) override {}
  void discard_gradients() override {}
  std::vector<NamedTensor> weights() const override { return {}; }

 private:
  Tensor grad() const { return slice_.has_embedding ? Tensor{} : activation_; }
  StageSlice slice_;
  Tensor activation_;
};

}  // namespace

StageModelFactory empty_stage_model_factory(std::int64_t micro_batch_size) {
  return [micro_batch_size](const GptConfig& config, const StageSlice& slice, std::uint64_t,
                            Device, float) {
    return std::make_unique<EmptyStageModel>(config, slice, micro_batch_size);
  };
}

}  // namespace conveyor
