#pragma once
// A CPU stage's state to and from checkpoint tensors: its parameters and their AdamW
// moments under global names (tensor_names.hpp). The GPU stage adds master.<name> the
// same way from its fp32 master copy.
#include <cstdint>
#include <vector>

#include "kernels/io/safetensors.hpp"
#include "kernels/model/param.hpp"
#include "kernels/optim/adamw.hpp"

namespace conveyor::checkpoint {

/// Host copies (clones: the caller may keep training) of each parameter, then its
/// opt.m/opt.v when the optimizer has taken a step (state.m non-empty).
std::vector<NamedTensor> capture_stage_tensors(const std::vector<Param>& params, const AdamWState& state);

/// Copies `tensors` (e.g. one element of reshard()'s result) into `params` and `state`,
/// setting state.t = optimizer_steps. Without opt.* tensors the state is left empty
/// (AdamW initialises it on its first step). Throws CheckpointError(`where`, ...) naming
/// any parameter whose tensor is missing or of another shape or dtype.
void restore_stage_tensors(const std::vector<NamedTensor>& tensors, std::vector<Param>& params,
                           AdamWState& state, std::int64_t optimizer_steps, const std::string& where);

}  // namespace conveyor::checkpoint
