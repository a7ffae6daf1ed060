// AdamW, element by element in float with the bias corrections computed in
// double. Invariant: params are updated in place; grads are read, never
// modified (the runtime zeroes them after the step).
#include "kernels/optim/adamw.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace conveyor {

std::int64_t flat_size(const std::vector<Param>& params) {
  std::int64_t n = 0;
  for (const Param& p : params) n += p.value.numel();
  return n;
}

Tensor zero_moments(const Param& param, const std::optional<ElementRange>& shard,
                    std::int64_t offset) {
  if (!shard) return Tensor::zeros(param.value.shape());
  return Tensor::zeros({local_overlap(*shard, offset, param.value.numel()).size()});
}

void adamw_step(std::vector<Param>& params, AdamWState& state, const AdamWConfig& config, float lr,
                float grad_scale) {
  if (state.m.empty() && state.v.empty()) {
    std::int64_t offset = 0;
    for (const Param& p : params) {
      state.m.push_back(zero_moments(p, state.shard, offset));
      state.v.push_back(zero_moments(p, state.shard, offset));
      offset += p.value.numel();
    }
  }
  if (state.m.size() != params.size() || state.v.size() != params.size())
    throw std::invalid_argument("adamw_step: state holds " + std::to_string(state.m.size()) +
                                " moments for " + std::to_string(params.size()) + " parameters");
  state.t += 1;
  const double t = static_cast<double>(state.t);
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(config.beta1), t));
  const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(config.beta2), t));
  const float b1 = config.beta1, b2 = config.beta2, eps = config.eps;
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    Param& p = params[i];
    const std::int64_t n = p.value.numel();
    // The elements this state updates: all, or the shard's part of this
    // parameter.
    const ElementRange mine =
        state.shard ? local_overlap(*state.shard, offset, n) : ElementRange{0, n};
    offset += n;
    if (p.grad.numel() != n || state.m[i].numel() != mine.size() ||
        state.v[i].numel() != mine.size())
      throw std::invalid_argument("adamw_step: parameter " + p.name + " " + p.value.describe() +
                                  " does not match its gradient or state");
    if (mine.size() == 0) continue;
    // From the shard's first element of this parameter: m[k] and v[k] belong to
    // w[k].
    float* w = p.value.f32() + mine.begin;
    const float* g = p.grad.f32() + mine.begin;
    float* m = state.m[i].f32();
    float* v = state.v[i].f32();
    const float wd = p.decay ? config.weight_decay : 0.0f;
    for (std::int64_t k = 0; k < mine.size(); ++k) {
      const float gk = g[k] * grad_scale;
      m[k] = b1 * m[k] + (1.0f - b1) * gk;
      v[k] = b2 * v[k] + (1.0f - b2) * gk * gk;
      const float mhat = m[k] / bc1;
      const float vhat = v[k] / bc2;
      w[k] -= lr * (mhat / (std::sqrt(vhat) + eps) + wd * w[k]);
    }
  }
}

double grad_square_sum(const Param& param) {
  double s = 0.0;
  for (float g : param.grad.f32_span()) s += static_cast<double>(g) * static_cast<double>(g);
  return s;
}

float clip_scale(double global_norm, double max_norm) {
  if (max_norm > 0.0 && global_norm > max_norm)
    return static_cast<float>(max_norm / (global_norm + 1e-6));
  return 1.0f;
}

}  // namespace conveyor
