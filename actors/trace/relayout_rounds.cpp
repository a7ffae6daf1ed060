#include "actors/trace/relayout_rounds.hpp"

#include <algorithm>

namespace conveyor::trace {

std::map<std::uint32_t, const LayoutSwitch*> interrupted_rounds(
    const TraceSet& set, const std::map<std::uint32_t, Round>& rounds) {
  std::map<std::uint32_t, const LayoutSwitch*> out;
  for (const auto& sw : set.switches) {
    if (sw.joined) continue;  // a grow waits for a step boundary: it interrupts nothing
    const auto it = rounds.find(sw.after_round);
    if (it == rounds.end()) continue;  // not traced (trace.steps), or no action ran in it
    const Round& round = it->second;
    bool incomplete = set.layout(round.generation) == nullptr;
    for (int a = 0; a < static_cast<int>(round.actions.size()) && !incomplete; ++a)
      incomplete =
          round.actions[static_cast<std::size_t>(a)].size() < plan_of(set, round, a).size();
    if (incomplete) out.emplace(sw.after_round, &sw);
  }
  return out;
}

std::map<int, int> actors_lost_later(const TraceSet& set, int generation) {
  std::map<int, int> out;
  const TracePlans* plans = set.layout(generation);
  if (!plans || plans->node_of_actor.empty()) return out;
  // The switches after this layout that lost a node for good; a node lost while it ran no
  // actor of this layout took nothing of it.
  for (std::size_t k = static_cast<std::size_t>(std::max(generation, 0)); k < set.switches.size();
       ++k) {
    const auto& sw = set.switches[k];
    if (sw.joined) continue;
    for (int a = 0; a < static_cast<int>(plans->node_of_actor.size()); ++a)
      if (plans->node_of_actor[static_cast<std::size_t>(a)] == sw.node) out.emplace(a, sw.node);
  }
  return out;
}

}  // namespace conveyor::trace
