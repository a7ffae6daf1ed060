#include "actors/checkpoint/stage_state.hpp"

#include "actors/checkpoint/checkpoint_error.hpp"

namespace conveyor::checkpoint {

std::vector<NamedTensor> capture_stage_tensors(const std::vector<Param>& params, const AdamWState& state) {
  return capture_param_state(params, state);
}

void restore_stage_tensors(const std::vector<NamedTensor>& tensors, std::vector<Param>& params,
                           AdamWState& state, std::int64_t optimizer_steps, const std::string& where) {
  try {
    restore_param_state(tensors, params, state, optimizer_steps);
  } catch (const StateMismatch& e) {
    throw CheckpointError(where, e.what());
  }
}

}  // namespace conveyor::checkpoint
