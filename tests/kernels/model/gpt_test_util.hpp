#pragma once
// Helpers for the GptStage tests: random batches and a hand-chained pipeline of stages.
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/model/gpt_stage.hpp"

namespace conveyor::testing {

inline Tensor random_tokens(std::int64_t B, std::int64_t T, std::int64_t V, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Tensor t = Tensor::zeros({B, T}, DType::i32);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.i32()[i] = static_cast<std::int32_t>(rng() % V);
  return t;
}

inline Tensor random_f32(Shape shape, std::uint64_t seed, double stddev = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> dist(0.0, stddev);
  Tensor t = Tensor::zeros(std::move(shape));
  for (float& x : t.f32_span()) x = static_cast<float>(dist(rng));
  return t;
}

struct Batch {
  Tensor tokens, targets;  // i32 (B, T)
};

inline Batch random_batch(std::int64_t B, std::int64_t T, std::int64_t V, std::uint64_t seed) {
  return {random_tokens(B, T, V, seed), random_tokens(B, T, V, seed + 1000)};
}

/// Stages of one model, built from the same seed, for a list of slices.
inline std::vector<GptStage> make_stages(const GptConfig& config,
                                         const std::vector<StageSlice>& slices,
                                         std::uint64_t seed) {
  std::vector<GptStage> stages;
  for (const auto& s : slices) stages.emplace_back(config, s, seed);
  return stages;
}

/// Forward of one micro-batch through every stage in order; returns the loss and the
/// stashes (one per stage). `outputs`, when given, gets a copy of each stage's activation.
inline double chain_forward(std::vector<GptStage>& stages, const Batch& batch,
                            std::vector<std::unique_ptr<StageStash>>& stashes,
                            std::vector<Tensor>* outputs = nullptr) {
  stashes.clear();
  Tensor x = batch.tokens;
  double loss = 0;
  for (auto& stage : stages) {
    StageForward f = stage.forward(x, batch.targets, /*keep_stash=*/true);
    stashes.push_back(std::move(f.stash));
    x = f.activation;
    if (outputs && x.defined()) outputs->push_back(x.clone());
    loss = f.loss;
  }
  return loss;
}

/// Backward of one micro-batch through every stage in reverse; `split` uses
/// backward_input then backward_weight instead of backward(). `outputs`, when given, gets a
/// copy of each stage's input gradient.
inline void chain_backward(std::vector<GptStage>& stages,
                           std::vector<std::unique_ptr<StageStash>>& stashes, float loss_scale,
                           bool split, std::vector<Tensor>* outputs = nullptr) {
  Tensor grad;
  for (std::size_t i = stages.size(); i-- > 0;) {
    if (split) {
      grad = stages[i].backward_input(*stashes[i], grad, loss_scale);
      stages[i].backward_weight(*stashes[i]);
    } else {
      grad = stages[i].backward(*stashes[i], grad, loss_scale);
    }
    if (outputs && grad.defined()) outputs->push_back(grad.clone());
  }
}

/// Every parameter's gradient (or value), by name, across the stages.
inline std::map<std::string, Tensor> by_name(const std::vector<GptStage>& stages, bool grads) {
  std::map<std::string, Tensor> out;
  for (const auto& stage : stages)
    for (const Param& p : stage.params()) out[p.name] = grads ? p.grad : p.value;
  return out;
}

inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

}  // namespace conveyor::testing
