#pragma once
// A lost process, in words that name its node and stages.
#include <string>

#include "actors/cluster/node_setup.hpp"
#include "transport/rendezvous/liveness_watch.hpp"

namespace conveyor {

/// What the loss of `loss` means for this node; `node0_lost` says whether node 0 (or its
/// store) is among the lost.
std::string describe_loss(const LivenessLoss& loss, const NodeSetup& setup, bool* node0_lost);

}  // namespace conveyor
