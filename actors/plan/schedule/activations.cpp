#include "actors/plan/schedule/activations.hpp"

#include <algorithm>

#include "actors/plan/schedule/dependencies.hpp"

namespace conveyor::sched {

std::vector<std::vector<int>> in_flight_counts(const Schedule& s) {
  const bool split = splits_backward(s);
  const ActionKind release = split ? ActionKind::W : ActionKind::B;
  std::vector<std::vector<int>> counts(s.ranks.size());
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    int n = 0;
    for (const Action& a : s.ranks[r]) {
      if (a.kind == ActionKind::F) ++n;
      if (a.kind == release) --n;
      counts[r].push_back(n);
    }
  }
  return counts;
}

std::vector<int> peak_activations(const Schedule& s) {
  std::vector<int> peaks;
  for (const auto& counts : in_flight_counts(s)) {
    peaks.push_back(counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end()));
  }
  return peaks;
}

}  // namespace conveyor::sched
