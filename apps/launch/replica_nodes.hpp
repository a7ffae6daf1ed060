#pragma once
// Which node runs each stage actor of a data-parallel job (parallel.data: R replicas of a
// P-stage pipeline, actors numbered replica-major: actors/plan/replica_placement.hpp). The R·P
// actors go to the nodes in contiguous ranges in actor order, as stages_of_node splits
// pipeline stages; with R = 1 that is exactly the split of the pipeline's stages.
//
//   R 2 × P 2, nnodes 2   → node 0: 0 1 (replica 0) | node 1: 2 3 (replica 1)
//                           pipeline edges stay inside a process; each stage's gradient
//                           average crosses processes
//   R 2 × P 2, nnodes 4   → one actor per node: replicas span processes
//   R 3 × P 2, nnodes 2   → node 0: 0 1 2 | node 1: 3 4 5 (replica 1 spans both)
//
// Pure logic: no CAF, no network.
#include <optional>
#include <vector>

#include "actors/plan/replica_placement.hpp"
#include "apps/config/run_config.hpp"

namespace conveyor {

/// The node of every actor of `layout`. Throws InputError, naming parallel.data and
/// pipeline.stages, when the actors do not split over `nnodes` (stages_of_node.hpp).
std::vector<int> node_of_actor(const ReplicaLayout& layout, int nnodes,
                               std::optional<int> per_node);

/// The same for a config: parallel.data replicas of pipeline.stages, devices.per_node
/// actors per node when set (else an even split).
std::vector<int> node_of_actor(const RunConfig& config, int nnodes);

/// The nodes replica `replica` runs on, ascending, each once.
/// REQUIRES: node_of_actor covers layout.actors(); 0 <= replica < layout.replicas.
std::vector<int> nodes_of_replica(const std::vector<int>& node_of_actor,
                                  const ReplicaLayout& layout, int replica);

}  // namespace conveyor
