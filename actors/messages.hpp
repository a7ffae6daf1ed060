#pragma once
// The pipeline protocol (actors/protocol.hpp) as CAF messages. They hold shared_ptrs
// and are therefore local to one process (CAF_ALLOW_UNSAFE_MESSAGE_TYPE); the
// multi-host path sends control metadata only and moves tensors over channels.
#include <caf/all.hpp>
#include <vector>

#include "actors/protocol.hpp"

namespace conveyor {

/// Handles of every stage actor by rank; sent once before the first plan.
struct PeerTable {
  std::vector<caf::actor> ranks;
};

using weights_atom = caf::atom_constant<caf::atom("weights")>;
using train_atom = caf::atom_constant<caf::atom("train")>;

}  // namespace conveyor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::PeerTable)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::StepPlan)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::PipeMessage)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::StageReport)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::OptimizerStep)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::OptimizerDone)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::WeightsReply)
