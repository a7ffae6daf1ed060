#include "actors/plan/replan_nodes.hpp"

namespace conveyor {

std::set<int> idle_nodes(const std::vector<int>& moved_onto, const std::vector<int>& node_of_rank) {
  std::set<int> idle(moved_onto.begin(), moved_onto.end());
  for (int n : node_of_rank) idle.erase(n);
  return idle;
}

std::vector<int> replan_nodes(const std::vector<int>& node_of_rank, const std::set<int>& idle,
                              const std::set<int>& joined, const std::set<int>& lost) {
  std::set<int> nodes(node_of_rank.begin(), node_of_rank.end());
  nodes.insert(idle.begin(), idle.end());
  nodes.insert(joined.begin(), joined.end());
  for (int n : lost) nodes.erase(n);
  return {nodes.begin(), nodes.end()};
}

}  // namespace conveyor
