#pragma once
// One pipeline stage's part of a decoder-only model on the CPU, GPT-2 or Llama (model.arch:
// the layers come from gpt2_layers.hpp or llama_layers.hpp): its parameters, forward and
// backward for one micro-batch at a time, with backward split into I (gradient of the
// input) and W (gradient of the weights) for zero-bubble schedules.
//
// Invariants that make pipeline training exact (bitwise identical for any split):
// - Parameters are initialised from (seed, parameter name) alone, never from the split.
// - Weight gradients are accumulated with += in the order backward_weight() is called;
//   the runtime calls it in micro-batch order on every stage.
// - backward() == backward_input() then backward_weight(), bit for bit.
// - Kernels run single-threaded in the calling thread (the stage owns one core).
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "kernels/model/gpt_config.hpp"
#include "kernels/model/param.hpp"
#include "kernels/model/stage_slice.hpp"
#include "kernels/tensor/tensor.hpp"

namespace conveyor {

/// Everything forward() keeps for the backward of one micro-batch, and what
/// backward_input() keeps for backward_weight(). Opaque to callers.
class StageStash {
 public:
  virtual ~StageStash() = default;
  /// Bytes held, for activation-memory accounting.
  virtual std::size_t bytes() const = 0;
};

struct StageForward {
  Tensor activation;                   // (B, T, C) f32; empty on the last stage
  double loss = 0.0;                   // mean cross-entropy over B*T tokens; last stage only
  std::unique_ptr<StageStash> stash;   // null when forward ran with keep_stash = false
  /// Set by a model that reads its loss back later (CudaStageOptions::defer_loss_readback):
  /// then `loss` is NaN and this returns it, waiting for the device if it must. Empty
  /// otherwise.
  std::function<double()> pending_loss;
};

/// What forward_logits returns.
struct StageLogits {
  Tensor logits;      // (B, T, V) f32: the LM head's output, before the softmax
  double loss = 0.0;  // as StageForward::loss, bit for bit
};

class GptStage {
 public:
  GptStage(const GptConfig& config, const StageSlice& slice, std::uint64_t seed);
  ~GptStage();
  GptStage(GptStage&&) noexcept;
  GptStage& operator=(GptStage&&) noexcept;

  const GptConfig& config() const;
  const StageSlice& slice() const;

  /// Forward of one micro-batch.
  /// `input`: i32 tokens (B, T) when the slice has the embedding, else f32 (B, T, C).
  /// `targets`: i32 (B, T), required when the slice has the head, else ignored.
  /// Throws std::invalid_argument on a wrong shape or dtype (the message names both).
  StageForward forward(const Tensor& input, const Tensor& targets, bool keep_stash);

  /// forward() without a stash, keeping the logits as well: for comparing the model with
  /// other implementations of it (apps/hf/checkpoint_logits.hpp, `conveyor hf logits`); training never needs
  /// them. Same checks as forward(); throws std::invalid_argument on a slice without the
  /// head.
  StageLogits forward_logits(const Tensor& input, const Tensor& targets);

  /// Full backward: accumulates weight gradients and returns the gradient of the input
  /// (f32 (B, T, C); empty when the slice has the embedding). `grad_output` is the
  /// gradient of the activation this stage produced; on the last stage it is ignored and
  /// the loss gradient is scaled by `loss_scale` (1 / micro_batches for a mean).
  Tensor backward(StageStash& stash, const Tensor& grad_output, float loss_scale);

  /// The two halves of backward(): I then W for the same stash.
  Tensor backward_input(StageStash& stash, const Tensor& grad_output, float loss_scale);
  void backward_weight(StageStash& stash);

  /// Parameters in a fixed global order: embedding, blocks by index, final norm, head.
  std::vector<Param>& params();
  const std::vector<Param>& params() const;
  void zero_grads();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// FLOPs of one forward of one token through the whole model (matmuls only), for
/// throughput reports.
double gpt_forward_flops_per_token(const GptConfig& config);

}  // namespace conveyor
