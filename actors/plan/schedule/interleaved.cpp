// Interleaved 1F1B (Megatron's virtual pipeline), looped placement: chunk c of rank r
// holds model stage c·p + r. Micro-batches go in groups of p; within a group the forwards
// run chunk 0 for the whole group, then chunk 1, …; the backwards walk the chunks in
// reverse. Because every group has exactly p micro-batches (m % p == 0), each chunk's B
// runs in micro-batch order.
// p=2, m=4, v=2 → r0 F0c0 F1c0 F0c1 F1c1 F2c0 B0c1 F3c0 B1c1 F2c1 B0c0 F3c1 B1c0 B2c1 B3c1
// B2c0 B3c0.
#include <algorithm>

#include "actors/plan/schedule/generators.hpp"

namespace conveyor::sched {
namespace {

// The k-th forward (or backward, with reverse_chunks) of any rank, k in 0..m·v−1.
Action nth(int rank, ActionKind kind, int k, int p, int v, bool reverse_chunks) {
  const int group = k / (p * v);
  const int in_group = k % (p * v);
  const int chunk = reverse_chunks ? v - 1 - in_group / p : in_group / p;
  return {rank, kind, group * p + in_group % p, chunk};
}

}  // namespace

Schedule make_interleaved(const ScheduleSpec& spec) {
  const int p = spec.stages;
  const int m = spec.micro_batches;
  const int v = spec.virtual_stages;
  const int total = m * v;  // forwards (and backwards) per rank
  Schedule s{spec, std::vector<std::vector<Action>>(p)};
  for (int r = 0; r < p; ++r) {
    auto& list = s.ranks[r];
    int next_f = 0;
    int next_b = 0;
    // 1. warm-up: enough forwards that the first backward finds its gradient on time
    const int warmup = std::min(2 * (p - 1 - r) + (v - 1) * p, total);
    while (next_f < warmup) list.push_back(nth(r, ActionKind::F, next_f++, p, v, false));
    // 2. steady state: one F, then one B
    while (next_f < total) {
      list.push_back(nth(r, ActionKind::F, next_f++, p, v, false));
      list.push_back(nth(r, ActionKind::B, next_b++, p, v, true));
    }
    // 3. cool-down: the backwards still owed
    while (next_b < total) list.push_back(nth(r, ActionKind::B, next_b++, p, v, true));
  }
  return s;
}

}  // namespace conveyor::sched
