#include "actors/runtime/action_duration_stats.hpp"

namespace conveyor {
namespace {

int slot(sched::ActionKind k) {
  switch (k) {
    case sched::ActionKind::F: return 0;
    case sched::ActionKind::B: return 1;
    case sched::ActionKind::I: return 2;
    case sched::ActionKind::W: return 3;
    default: return -1;
  }
}

}  // namespace

ActionDurationStats::ActionDurationStats(const sched::Schedule& schedule)
    : schedule_(schedule), sums_(schedule.spec.stages) {}

void ActionDurationStats::add(const std::vector<StageReport>& reports) {
  sched::SimCosts replay;
  for (const auto& r : reports)
    for (const auto& t : r.timings) replay.action_us[t.action.str(true)] = (t.end_ns - t.start_ns) / 1e3;
  const auto sim = sched::simulate(schedule_, replay);
  if (sim.ok()) replayed_bubble_sum_ += sim.bubble;
  for (const auto& r : reports) {
    if (r.rank < 0 || r.rank >= static_cast<int>(sums_.size())) continue;
    for (const auto& t : r.timings) {
      const int s = slot(t.action.kind);
      if (s < 0) continue;
      sums_[r.rank][s].us += (t.end_ns - t.start_ns) / 1e3;
      ++sums_[r.rank][s].count;
    }
  }
  ++steps_;
}

sched::SimCosts ActionDurationStats::costs() const {
  sched::SimCosts c;
  c.f_us.clear();
  c.b_us.clear();
  c.i_us.clear();
  c.w_us.clear();
  for (const auto& rank : sums_) {
    c.f_us.push_back(rank[0].mean());
    c.b_us.push_back(rank[1].mean());
    c.i_us.push_back(rank[2].mean());
    c.w_us.push_back(rank[3].mean());
  }
  return c;
}

}  // namespace conveyor
