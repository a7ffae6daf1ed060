#pragma once
// What the layers of a stage (gpt2_layers.hpp, llama_layers.hpp) share: their parameters,
// found by position in the stage's params() list, and the helpers that declare them in its
// ParamLayout list (param_layout.hpp).
// Values and gradients are looked up on every call, so a caller may replace a Param's
// tensors (e.g. when loading weights) between calls; the list itself never moves (the
// stage keeps it on the heap).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/model/gpt_config.hpp"
#include "kernels/model/param.hpp"
#include "kernels/model/param_layout.hpp"

namespace conveyor {

/// A layer's parameters: params()[first + k] is its k-th, in its layout's order.
class LayerParams {
 public:
  LayerParams(std::vector<Param>& params, std::size_t first) : params_(&params), first_(first) {}
  const float* w(std::size_t k) const { return (*params_)[first_ + k].value.f32(); }
  float* g(std::size_t k) const { return (*params_)[first_ + k].grad.f32(); }
  std::size_t first() const { return first_; }

 private:
  std::vector<Param>* params_;
  std::size_t first_;
};

/// Normal(0, 0.02): GPT-2's and Llama's (initializer_range) init of weights and embeddings.
inline constexpr double kInitStd = 0.02;

/// GPT-2's scaled init of the projections that feed the residual stream: 0.02 / sqrt(2 L).
inline double residual_init_std(const GptConfig& c) {
  return kInitStd / std::sqrt(2.0 * static_cast<double>(c.layers));
}

inline std::string block_param_name(int block, const char* rest) {
  return "blocks." + std::to_string(block) + "." + rest;
}

/// A parameter drawn from Normal(0, stddev) of its own stream (seed, name).
inline void add_normal_param(std::vector<ParamLayout>& out, std::string name, Shape shape,
                             double stddev, bool decay) {
  std::string stream = name;
  out.push_back({std::move(name), std::move(shape), decay, ParamLayout::Init::normal, stddev,
                 std::move(stream)});
}

/// A parameter filled with `value` (norm weights 1, biases 0), never decayed.
inline void add_constant_param(std::vector<ParamLayout>& out, std::string name, Shape shape,
                               float value) {
  out.push_back(
      {std::move(name), std::move(shape), false, ParamLayout::Init::constant, 0.0, {}, value});
}

/// lm_head.weight (V, C). Tied (model.tie_embeddings), it is the embedding's copy: wte's
/// values (its stream) and no weight decay, as wte — AdamW must treat both copies alike
/// for them to stay equal.
inline void add_lm_head_param(std::vector<ParamLayout>& out, const GptConfig& c) {
  if (c.tie_embeddings) {
    add_normal_param(out, "lm_head.weight", {c.vocab, c.d_model}, kInitStd, false);
    out.back().stream = "wte.weight";
  } else {
    add_normal_param(out, "lm_head.weight", {c.vocab, c.d_model}, kInitStd, true);
  }
}

}  // namespace conveyor
