#include "actors/plan/leader_election.hpp"

#include <fmt/format.h>

namespace conveyor {

int successor(const std::vector<int>& kept, int lost_leader) {
  int lowest = -1;
  for (int n : kept)
    if (n != lost_leader && (lowest < 0 || n < lowest)) lowest = n;
  return lowest;
}

int standby_of(const std::vector<int>& nodes, int leader) { return successor(nodes, leader); }

Election elect(const std::vector<int>& kept, int lost_leader, const std::set<int>& also_lost) {
  const int next = successor(kept, lost_leader);
  if (next < 0)
    return {-1, fmt::format("node {} led the job alone: no other node is left to take it over",
                            lost_leader)};
  if (also_lost.count(next))
    return {
        -1,
        fmt::format(
            "node {}, which stood by for node {} with the copies of its stages' snapshots, is lost "
            "too: no other node holds them",
            next, lost_leader)};
  return {next, {}};
}

}  // namespace conveyor
