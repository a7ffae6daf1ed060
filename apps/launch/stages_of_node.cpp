#include "apps/launch/stages_of_node.hpp"

#include <algorithm>
#include <string>

#include "kernels/common/error.hpp"

namespace conveyor {
namespace {

// The devices.per_node values that split `count` stages over nnodes > 1 nodes: enough
// that the nodes hold them all (N * nnodes >= count), few enough that the last node gets
// one (N * (nnodes - 1) < count). The range can be empty (4 stages on 3 nodes: 1 holds too
// few, 2 leaves the last node none). REQUIRES: count >= nnodes > 1.
std::string per_node_values(int count, int nnodes) {
  const int low = (count + nnodes - 1) / nnodes;
  const int high = (count - 1) / (nnodes - 1);
  const std::string balanced = "devices.per_node 0 shares them as evenly as possible";
  if (low > high)
    return "no devices.per_node > 0 splits them (it gives every node but the last the same count, the last "
           "the rest, at least one); " + balanced;
  const std::string values = low == high ? std::to_string(low) : std::to_string(low) + " to " + std::to_string(high);
  return "devices.per_node " + values + " splits them (every node but the last that many, the last the rest), "
         "or " + balanced;
}

}  // namespace

std::vector<int> split_over_nodes(int count, const std::string& what, int nnodes, int node_rank,
                                  std::optional<int> per_node) {
  const std::string job =
      what + " on " + std::to_string(nnodes) + (nnodes == 1 ? " node" : " nodes");
  if (count < 1) throw InputError("launch: " + what + " must be at least 1");
  if (nnodes < 1) throw InputError("launch: nnodes=" + std::to_string(nnodes) + " must be at least 1");
  if (node_rank < 0 || node_rank >= nnodes)
    throw InputError("launch: node rank " + std::to_string(node_rank) + " must be from 0 to " +
                     std::to_string(nnodes - 1));
  if (count < nnodes)
    throw InputError("launch: " + job + ": every node needs at least one stage");
  if (!per_node) {
    // As evenly as possible: the first count % nnodes nodes take one more (6 on 4: 2 2 1 1).
    const int base = count / nnodes, extra = count % nnodes;
    const int first = node_rank * base + std::min(node_rank, extra);
    std::vector<int> out;
    for (int s = first; s < first + base + (node_rank < extra ? 1 : 0); ++s) out.push_back(s);
    return out;
  }
  const int each = *per_node;
  const std::string with = job + " with " + std::to_string(each) + " stages per node";
  if (each < 1) throw InputError("launch: " + with + ": stages per node must be at least 1");
  if (static_cast<long long>(each) * nnodes < count)
    throw InputError("launch: " + with + ": the nodes hold only " +
                     std::to_string(static_cast<long long>(each) * nnodes) + " stages; " +
                     per_node_values(count, nnodes));
  if (static_cast<long long>(each) * (nnodes - 1) >= count)
    throw InputError("launch: " + with + ": node " + std::to_string(nnodes - 1) +
                     " would get no stage; " + per_node_values(count, nnodes));
  const int first = node_rank * each;
  const int last = std::min(count, first + each);  // exclusive
  std::vector<int> out;
  for (int s = first; s < last; ++s) out.push_back(s);
  return out;
}

std::vector<int> stages_of_node(int stages, int nnodes, int node_rank, std::optional<int> per_node) {
  return split_over_nodes(stages, "pipeline.stages=" + std::to_string(stages), nnodes, node_rank,
                          per_node);
}

}  // namespace conveyor
