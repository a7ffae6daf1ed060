#pragma once
// Which pipeline stages run on which node: contiguous ranges, node 0 first, so that
// every pipeline edge but one per node boundary stays inside a process.
//
//   stages 8, nnodes 4               → node 0: 0 1 | node 1: 2 3 | node 2: 4 5 | node 3: 6 7
//   stages 6, nnodes 4               → node 0: 0 1 | node 1: 2 3 | node 2: 4 | node 3: 5
//                                      (as evenly as possible: the first nodes one more)
//   stages 7, nnodes 2, per_node 4   → node 0: 0 1 2 3 | node 1: 4 5 6   (the last node
//                                      takes what is left; every node gets at least one)
#include <optional>
#include <string>
#include <vector>

namespace conveyor {

/// The stages of node `node_rank`. Without `per_node`, as evenly as possible (the first
/// stages % nnodes nodes take one more). An InputError for a node left without a stage,
/// too few stages per node to hold them all, or node_rank outside [0, nnodes).
std::vector<int> stages_of_node(int stages, int nnodes, int node_rank, std::optional<int> per_node);

/// The same split of `count` stages, named in errors as `what` (e.g. "pipeline.stages=4").
std::vector<int> split_over_nodes(int count, const std::string& what, int nnodes, int node_rank,
                                  std::optional<int> per_node);

}  // namespace conveyor
