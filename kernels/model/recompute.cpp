#include "kernels/model/recompute.hpp"

namespace conveyor {

std::string_view recompute_name(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::attention: return "attention";
    case Recompute::full: return "full";
  }
  return "?";
}

std::optional<Recompute> parse_recompute(std::string_view name) {
  for (Recompute r : {Recompute::none, Recompute::attention, Recompute::full})
    if (recompute_name(r) == name) return r;
  return std::nullopt;
}

const std::vector<std::string>& known_recompute_names() {
  static const std::vector<std::string> names = {"none", "attention", "full"};
  return names;
}

}  // namespace conveyor
