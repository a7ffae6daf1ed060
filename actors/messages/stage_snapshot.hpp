#pragma once
// The checkpoint request a coordinator sends a stage actor at a step boundary, and the
// reply: the stage's state as host copies (StageWorker::capture_state()). The reply holds
// tensors, so it stays inside one process (multi-process runs do not checkpoint yet).
#include <caf/all.hpp>
#include <vector>

#include "kernels/io/safetensors.hpp"

namespace conveyor {

using snapshot_atom = caf::atom_constant<caf::atom("snapshot")>;

struct StageSnapshot {
  int rank = 0;
  std::vector<NamedTensor> tensors;  // global names, host copies
  std::int64_t optimizer_steps = 0;  // AdamW's step count
};

}  // namespace conveyor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::StageSnapshot)
