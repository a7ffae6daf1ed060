#pragma once
// The final weights of a run with data-parallel replicas (parallel.data > 1, issue 9):
// every stage actor's weights, assembled into one whole model per replica. Replicas step
// on bitwise identical averaged gradients from bitwise identical initial weights, so
// their models must end bitwise identical; a difference is a bug the run must not hide.
// Pure: no CAF.
#include <optional>
#include <string>
#include <vector>

#include "actors/plan/protocol.hpp"
#include "actors/plan/replica_placement.hpp"

namespace conveyor {

/// Each replica's whole model, in global parameter order (model stage, then parameter),
/// from the replies of every actor of `layout` (any order, each actor once).
std::vector<std::vector<NamedTensor>> weights_by_replica(const std::vector<WeightsReply>& replies,
                                                         const ReplicaLayout& layout);

/// The first tensor where a replica differs from replica 0 (names, shapes, dtypes or
/// bytes), as "replica 1 differs from replica 0 in blocks.0.ln1.weight"; nullopt when
/// every replica is bitwise replica 0.
std::optional<std::string> replica_difference(const std::vector<std::vector<NamedTensor>>& replicas);

}  // namespace conveyor
