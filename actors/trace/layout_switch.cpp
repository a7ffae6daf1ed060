#include "actors/trace/layout_switch.hpp"

#include <algorithm>

namespace conveyor::trace {

std::vector<LayoutSwitch> find_layout_switches(const std::vector<Record>& records) {
  std::vector<LayoutSwitch> out;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const Record& r = records[i];
    if (r.kind != RecordKind::replan && r.kind != RecordKind::joined) continue;
    out.push_back({r.round, r.kind == RecordKind::joined, r.peer, r.step, i});
  }
  // Two switches with no round between them (a grow right after a shrink) keep their order
  // in time: the records are by start, and stable_sort keeps it.
  std::stable_sort(out.begin(), out.end(), [](const LayoutSwitch& a, const LayoutSwitch& b) {
    return a.after_round < b.after_round;
  });
  return out;
}

int generation_of(const std::vector<LayoutSwitch>& switches, std::uint32_t round) {
  int g = 0;
  for (const auto& s : switches)
    if (s.after_round < round) ++g;
  return g;
}

}  // namespace conveyor::trace
