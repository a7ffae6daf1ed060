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

namespace {
constexpr Recompute kAll[] = {Recompute::none, Recompute::attention, Recompute::full};
}  // namespace

std::optional<Recompute> parse_recompute(std::string_view name) {
  for (Recompute r : kAll)
    if (recompute_name(r) == name) return r;
  return std::nullopt;
}

const std::vector<std::string>& known_recompute_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (Recompute r : kAll) out.emplace_back(recompute_name(r));
    return out;
  }();
  return names;
}

}  // namespace conveyor
