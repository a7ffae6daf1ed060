#include "transport/collective/stage_group.hpp"

#include <stdexcept>

namespace conveyor {

std::string StageGroup::store_prefix() const {
  return "collective/" + name + "/" + std::to_string(generation) + "/";
}

std::string StageGroup::describe() const {
  return "collective: group '" + name + "' (rank " + std::to_string(rank) + " of " +
         std::to_string(size) + ")";
}

void StageGroup::validate() const {
  if (name.empty()) throw std::invalid_argument("collective: a stage group needs a name");
  if (size < 1 || rank < 0 || rank >= size)
    throw std::invalid_argument(describe() + ": the rank must lie in [0, size)");
}

}  // namespace conveyor
