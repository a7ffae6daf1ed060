#include "actors/fault/restored_snapshot.hpp"

#include <memory>

namespace conveyor {

std::optional<StageStateSnapshot> restored_snapshot(const RankPlacement& stage, std::int64_t steps_done,
                                                    std::vector<NamedTensor> tensors,
                                                    std::int64_t optimizer_steps) {
  if (stage.chunks.size() != 1 || !stage.device.is_cpu()) return std::nullopt;
  for (const auto& t : tensors)
    if (!t.tensor.defined() || !t.tensor.device().is_cpu()) return std::nullopt;
  return StageStateSnapshot{steps_done,
                            {std::make_shared<TensorStateSnapshot>(std::move(tensors), optimizer_steps)}};
}

}  // namespace conveyor
