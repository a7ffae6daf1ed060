#include "apps/config/yaml_size.hpp"

#include <fmt/format.h>

#include <vector>

#include "kernels/common/error.hpp"

namespace conveyor {

std::size_t expanded_node_count(const YAML::Node& node, std::size_t limit) {
  // Iterative: a deeply nested document must not overflow the stack either.
  std::vector<YAML::Node> pending{node};
  std::size_t count = 0;
  while (!pending.empty() && count <= limit) {
    const YAML::Node n = pending.back();
    pending.pop_back();
    ++count;
    if (n.IsSequence()) {
      for (const auto& item : n) pending.push_back(item);
    } else if (n.IsMap()) {
      for (const auto& item : n) {
        pending.push_back(item.first);
        pending.push_back(item.second);
      }
    }
    // A map of a million entries would be pushed whole before the count sees it: the
    // pending list is the work to bound too.
    if (count + pending.size() > limit + 1) return limit + 1;
  }
  return count;
}

void refuse_oversized_yaml(const YAML::Node& node, const std::string& where) {
  if (expanded_node_count(node, kMaxConfigNodes) <= kMaxConfigNodes) return;
  throw InputError(fmt::format(
      "{}: the YAML expands to more than {} values (nested anchors and aliases?): a config "
      "is a few dozen keys; refused before reading it",
      where, kMaxConfigNodes));
}

}  // namespace conveyor
