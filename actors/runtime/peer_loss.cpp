#include "actors/runtime/peer_loss.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

namespace conveyor {

std::string describe_loss(const LivenessLoss& loss, const NodeSetup& setup, bool* node0_lost) {
  if (loss.silent_ranks.empty()) {
    *node0_lost = true;
    return fmt::format("node 0 ended or became unreachable (its rendezvous store: {})", loss.detail);
  }
  *node0_lost = loss.silent_ranks.front() == 0;
  std::vector<int> stages;
  for (int r = 0; r < static_cast<int>(setup.node_of_rank.size()); ++r)
    for (auto n : loss.silent_ranks)
      if (setup.node_of_rank[r] == static_cast<int>(n)) stages.push_back(r);
  return fmt::format("{} {} failed: node {} stopped responding ({})",
                     stages.size() == 1 ? "stage" : "stages", fmt::join(stages, ", "),
                     fmt::join(loss.silent_ranks, ", "), loss.detail);
}

}  // namespace conveyor
