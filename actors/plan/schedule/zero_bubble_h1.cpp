// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism"): 1F1B's order of F and I, with the
// weight-gradient W of rank r lagging its I by r backward actions. The lag is what fills
// the cool-down bubble: rank r's last r W run while later ranks would otherwise wait.
// Rank 0 is plain 1F1B with B split into I W. With F = I = W the idle time per rank is
// p−1 instead of 1F1B's 3(p−1); the activation count stays 1F1B's (W frees it).
// p=4, m=8, r3 → F0 I0 F1 I1 F2 I2 F3 I3 W0 F4 I4 W1 F5 I5 W2 F6 I6 W3 F7 I7 W4 W5 W6 W7.
#include <algorithm>
#include <deque>

#include "actors/plan/schedule/generators.hpp"

namespace conveyor::sched {

Schedule make_zero_bubble_h1(const ScheduleSpec& spec) {
  const int p = spec.stages;
  const int m = spec.micro_batches;
  Schedule s{spec, std::vector<std::vector<Action>>(p)};
  for (int r = 0; r < p; ++r) {
    auto& list = s.ranks[r];
    std::deque<int> pending_w;  // micro-batches whose I ran and whose W did not
    int next_f = 0;
    int next_i = 0;
    const auto backward = [&] {
      list.push_back({r, ActionKind::I, next_i, 0});
      pending_w.push_back(next_i++);
      if (static_cast<int>(pending_w.size()) > r) {
        list.push_back({r, ActionKind::W, pending_w.front(), 0});
        pending_w.pop_front();
      }
    };
    // 1. warm-up: as 1F1B
    const int warmup = std::min(p - 1 - r, m);
    while (next_f < warmup) list.push_back({r, ActionKind::F, next_f++, 0});
    // 2. steady state: one F, then one I (and the W lagging r behind)
    while (next_f < m) {
      list.push_back({r, ActionKind::F, next_f++, 0});
      backward();
    }
    // 3. cool-down: the I still owed, W still lagging
    while (next_i < m) backward();
    // 4. flush: the W held back, oldest first
    for (int i : pending_w) list.push_back({r, ActionKind::W, i, 0});
  }
  return s;
}

}  // namespace conveyor::sched
