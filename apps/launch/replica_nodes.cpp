#include "apps/launch/replica_nodes.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "apps/launch/stages_of_node.hpp"

namespace conveyor {

std::vector<int> node_of_actor(const ReplicaLayout& layout, int nnodes,
                               std::optional<int> per_node) {
  const int actors = layout.actors();
  const std::string what =
      layout.replicas == 1
          ? fmt::format("pipeline.stages={}", layout.stages)
          : fmt::format("parallel.data={} × pipeline.stages={} = {} stages", layout.replicas,
                        layout.stages, actors);
  std::vector<int> node(static_cast<std::size_t>(std::max(actors, 0)), -1);
  // max: a bad nnodes reaches split_over_nodes, whose error names it.
  for (int n = 0; n < std::max(nnodes, 1); ++n)
    for (int a : split_over_nodes(actors, what, nnodes, n, per_node))
      node.at(static_cast<std::size_t>(a)) = n;
  return node;
}

std::vector<int> nodes_of_replica(const std::vector<int>& node_of_actor,
                                  const ReplicaLayout& layout, int replica) {
  if (static_cast<int>(node_of_actor.size()) != layout.actors() || replica < 0 ||
      replica >= layout.replicas)
    throw std::out_of_range(fmt::format("nodes_of_replica: replica {} of {} over {} actors",
                                        replica, layout.replicas, node_of_actor.size()));
  std::vector<int> nodes;
  for (int s = 0; s < layout.stages; ++s) {
    const int n = node_of_actor[static_cast<std::size_t>(layout.actor(replica, s))];
    if (std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
  }
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

std::vector<int> node_of_actor(const RunConfig& config, int nnodes) {
  std::optional<int> per_node;
  if (config.devices.per_node > 0) per_node = static_cast<int>(config.devices.per_node);
  const ReplicaLayout layout{static_cast<int>(config.parallel.data),
                             static_cast<int>(config.pipeline.stages)};
  return node_of_actor(layout, nnodes, per_node);
}

}  // namespace conveyor
