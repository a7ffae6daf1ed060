#pragma once
// A CPU stage's state to and from checkpoint tensors (kernels/model/param_state.hpp), with
// the checkpoint library's error: a mismatch names the checkpoint it came from.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/model/param_state.hpp"

namespace conveyor::checkpoint {

/// capture_param_state.
std::vector<NamedTensor> capture_stage_tensors(const std::vector<Param>& params, const AdamWState& state);

/// restore_param_state; a StateMismatch becomes CheckpointError(`where`, ...).
void restore_stage_tensors(const std::vector<NamedTensor>& tensors, std::vector<Param>& params,
                           AdamWState& state, std::int64_t optimizer_steps, const std::string& where);

}  // namespace conveyor::checkpoint
