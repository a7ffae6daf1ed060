#include "actors/stage/stateful_stage_model.hpp"

#include <stdexcept>

#include "actors/checkpoint/stage_state.hpp"

namespace conveyor {

std::vector<NamedTensor> StatefulCpuStageModel::capture_state() const {
  return checkpoint::capture_stage_tensors(stage().params(), optimizer());
}

void StatefulCpuStageModel::restore_state(const std::vector<NamedTensor>& tensors,
                                          std::int64_t optimizer_steps, const std::string& where) {
  checkpoint::restore_stage_tensors(tensors, stage().params(), optimizer(), optimizer_steps, where);
}

std::unique_ptr<StatefulCpuStageModel> make_stateful_cpu_stage_model(const GptConfig& config,
                                                                     const StageSlice& slice,
                                                                     std::uint64_t seed,
                                                                     Device device) {
  if (!device.is_cpu())
    throw std::invalid_argument("make_stateful_cpu_stage_model: device " + device.str() +
                                " is not the CPU");
  return std::make_unique<StatefulCpuStageModel>(config, slice, seed);
}

}  // namespace conveyor
