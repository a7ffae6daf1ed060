#pragma once
// AdamW (decoupled weight decay) over a stage's parameters, fp32 state.
#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/model/param.hpp"
#include "kernels/optim/optimizer_shard.hpp"

namespace conveyor {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

struct AdamWState {
  /// One per parameter, same order as the params: its moments (the parameter's shape), or
  /// with a shard the moments of its elements inside the shard only (1-D, maybe empty).
  std::vector<Tensor> m, v;
  std::int64_t t = 0;  // steps taken
  /// ZeRO-1 (optimizer_shard.hpp): the elements of the flattened parameters this replica
  /// updates and keeps moments for; none = every element.
  std::optional<ElementRange> shard;
};

/// One AdamW step: grad is multiplied by `grad_scale` (gradient clipping) first.
/// Parameters with decay == false get no weight decay. Initialises `state` on first use.
/// With state.shard only the shard's weights change (the others are left for the
/// all-gather); each element's update is bitwise the one an unsharded step computes.
void adamw_step(std::vector<Param>& params, AdamWState& state, const AdamWConfig& config,
                float lr, float grad_scale);

/// Element count of `params` flattened (what a shard is a range of).
std::int64_t flat_size(const std::vector<Param>& params);

/// The moment tensors `state.shard` gives parameter `param` (at element `offset` of the
/// flattened parameters): zeros of the parameter's shape without a shard, else of its
/// overlap with the shard, 1-D.
Tensor zero_moments(const Param& param, const std::optional<ElementRange>& shard,
                    std::int64_t offset);

/// Sum of squares of one gradient, in double, in element order: the runtime adds these
/// up in the global parameter order so the clipping norm does not depend on the split.
double grad_square_sum(const Param& param);

/// Scale that clips the global gradient norm to `max_norm` (1 when under it or max_norm <= 0).
float clip_scale(double global_norm, double max_norm);

}  // namespace conveyor
