#include "apps/launch/stages_of_node.hpp"

#include <algorithm>
#include <string>

#include "kernels/common/error.hpp"

namespace conveyor {

std::vector<int> split_over_nodes(int count, const std::string& what, const std::string& keys,
                                  int nnodes, int node_rank, std::optional<int> per_node) {
  const std::string job =
      what + " on " + std::to_string(nnodes) + (nnodes == 1 ? " node" : " nodes");
  if (count < 1) throw InputError("launch: " + what + " must be at least 1");
  if (nnodes < 1) throw InputError("launch: nnodes=" + std::to_string(nnodes) + " must be at least 1");
  if (node_rank < 0 || node_rank >= nnodes)
    throw InputError("launch: node rank " + std::to_string(node_rank) + " must be from 0 to " +
                     std::to_string(nnodes - 1));
  if (count < nnodes)
    throw InputError("launch: " + job + ": every node needs at least one stage");
  int each = count / nnodes;
  if (per_node) {
    each = *per_node;
    const std::string with = job + " with " + std::to_string(each) + " stages per node";
    if (each < 1) throw InputError("launch: " + with + ": stages per node must be at least 1");
    if (static_cast<long long>(each) * nnodes < count)
      throw InputError("launch: " + with + ": the nodes hold only " +
                       std::to_string(static_cast<long long>(each) * nnodes) + " stages");
    if (static_cast<long long>(each) * (nnodes - 1) >= count)
      throw InputError("launch: " + with + ": node " + std::to_string(nnodes - 1) +
                       " would get no stage");
  } else if (count % nnodes != 0) {
    throw InputError("launch: " + job + ": the stages do not divide evenly (" +
                     std::to_string(count % nnodes) +
                     " left over); give the stages per node (devices.per_node) or change " + keys);
  }
  const int first = node_rank * each;
  const int last = std::min(count, first + each);  // exclusive
  std::vector<int> out;
  for (int s = first; s < last; ++s) out.push_back(s);
  return out;
}

std::vector<int> stages_of_node(int stages, int nnodes, int node_rank, std::optional<int> per_node) {
  return split_over_nodes(stages, "pipeline.stages=" + std::to_string(stages), "pipeline.stages",
                          nnodes, node_rank, per_node);
}

}  // namespace conveyor
