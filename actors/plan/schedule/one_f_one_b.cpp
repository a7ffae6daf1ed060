// 1F1B (PipeDream-flush): rank r keeps at most p−r micro-batches in flight.
// p=2, m=4 → r0 F0 F1 B0 F2 B1 F3 B2 B3, r1 F0 B0 F1 B1 F2 B2 F3 B3.
#include <algorithm>

#include "actors/plan/schedule/generators.hpp"

namespace conveyor::sched {

Schedule make_one_f_one_b(const ScheduleSpec& spec) {
  const int p = spec.stages;
  const int m = spec.micro_batches;
  Schedule s{spec, std::vector<std::vector<Action>>(p)};
  for (int r = 0; r < p; ++r) {
    auto& list = s.ranks[r];
    int next_f = 0;
    int next_b = 0;
    // 1. warm-up: fill the pipeline below this rank
    const int warmup = std::min(p - 1 - r, m);
    while (next_f < warmup) list.push_back({r, ActionKind::F, next_f++, 0});
    // 2. steady state: one F, then one B
    while (next_f < m) {
      list.push_back({r, ActionKind::F, next_f++, 0});
      list.push_back({r, ActionKind::B, next_b++, 0});
    }
    // 3. cool-down: the backwards still owed
    while (next_b < m) list.push_back({r, ActionKind::B, next_b++, 0});
  }
  return s;
}

}  // namespace conveyor::sched
