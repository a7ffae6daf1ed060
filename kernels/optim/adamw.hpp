#pragma once
// AdamW (decoupled weight decay) over a stage's parameters, fp32 state.
#include <cstdint>
#include <vector>

#include "kernels/model/param.hpp"

namespace conveyor {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

struct AdamWState {
  std::vector<Tensor> m, v;  // one per parameter, same order as the params
  std::int64_t t = 0;        // steps taken
};

/// One AdamW step: grad is multiplied by `grad_scale` (gradient clipping) first.
/// Parameters with decay == false get no weight decay. Initialises `state` on first use.
void adamw_step(std::vector<Param>& params, AdamWState& state, const AdamWConfig& config,
                float lr, float grad_scale);

/// Sum of squares of one gradient, in double, in element order: the runtime adds these
/// up in the global parameter order so the clipping norm does not depend on the split.
double grad_square_sum(const Param& param);

/// Scale that clips the global gradient norm to `max_norm` (1 when under it or max_norm <= 0).
float clip_scale(double global_norm, double max_norm);

}  // namespace conveyor
