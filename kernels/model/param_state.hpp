#pragma once
// A host (CPU) stage's training state to and from named tensors: its parameters and their
// AdamW moments under the global names of state_names.hpp.
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "kernels/io/safetensors.hpp"
#include "kernels/model/param.hpp"
#include "kernels/optim/adamw.hpp"

namespace conveyor {

/// State that does not fit the stage it is restored into: a tensor missing, or of another
/// shape or dtype. The message names the tensor.
class StateMismatch : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// Host copies (clones: the caller may keep training) of each parameter, then its
/// opt.m/opt.v when the optimizer has taken a step (state.m non-empty). With a shard
/// (ZeRO-1) the moments come out in the parameter's shape, zero outside the shard: the
/// replicas' captures add up to the whole state (merge_sharded_moments in
/// actors/checkpoint/sharded_state.hpp).
std::vector<NamedTensor> capture_param_state(const std::vector<Param>& params, const AdamWState& state);

/// Copies `tensors` (more may be there: only this stage's names are read) into `params`
/// and `state`, setting state.t = optimizer_steps. Without opt.* tensors the state is left
/// empty (AdamW initialises it on its first step). With state.shard set, only the shard's
/// part of each moment is kept (the shard stays). Throws StateMismatch before changing
/// anything.
void restore_param_state(const std::vector<NamedTensor>& tensors, std::vector<Param>& params,
                         AdamWState& state, std::int64_t optimizer_steps);

}  // namespace conveyor
