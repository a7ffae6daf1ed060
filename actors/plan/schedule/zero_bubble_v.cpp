// ZB-V (Qi et al., "Pipeline Parallelism with Controllable Memory"; PyTorch's
// ScheduleZBVZeroBubble): two chunks per rank in a V — chunk 0 holds stage r, chunk 1
// stage 2p−1−r — so the last model stage sits on rank 0 next to the first. With
// F = I = W the only idle time is the start skew, p−1 per rank.
// As PyTorch does, the order is built for n = max(2p−1, m) micro-batches and actions with
// a micro-batch index >= m are dropped, which keeps small m valid.
// Every W of a chunk runs in micro-batch order: the held-back W are kept in FIFOs.
#include <algorithm>
#include <deque>

#include "actors/plan/schedule/generators.hpp"

namespace conveyor::sched {
namespace {

// Builds rank r's list for n micro-batches (no dropping).
std::vector<Action> rank_order(int r, int p, int n) {
  std::vector<Action> list;
  int next_f[2] = {0, 0};
  int next_i[2] = {0, 0};
  std::deque<int> pending_w[2];
  const auto f = [&](int c) { list.push_back({r, ActionKind::F, next_f[c]++, c}); };
  const auto i = [&](int c) {  // I; its W is held back
    pending_w[c].push_back(next_i[c]);
    list.push_back({r, ActionKind::I, next_i[c]++, c});
  };
  const auto oldest_w = [&](int c) {
    list.push_back({r, ActionKind::W, pending_w[c].front(), c});
    pending_w[c].pop_front();
  };

  // 1. warm-up: forwards of chunk 0 down the first leg of the V
  for (int k = 0; k < 2 * (p - r) - 1; ++k) f(0);
  // 2. pairs (F c1, F c0) as the first micro-batches come back up the V
  for (int k = 0; k < r; ++k) {
    f(1);
    f(0);
  }
  // 3. triples (F c1, I c1, W c1): the first gradients start at the V's tip
  for (int k = 0; k < p - r; ++k) {
    f(1);
    i(1);
    oldest_w(1);
  }
  // 4. steady state, while forwards remain
  while (next_f[1] < n) {
    if (next_f[0] < n) f(0);
    i(0);
    oldest_w(0);
    f(1);
    i(1);
    oldest_w(1);
  }
  // 5. cool-down: r pairs (I c0, I c1) with W held back, then p−r pairs (I c0, oldest W c0),
  //    then the pending W of chunk 1, then those of chunk 0
  for (int k = 0; k < r; ++k) {
    i(0);
    i(1);
  }
  for (int k = 0; k < p - r; ++k) {
    i(0);
    oldest_w(0);
  }
  while (!pending_w[1].empty()) oldest_w(1);
  while (!pending_w[0].empty()) oldest_w(0);
  return list;
}

}  // namespace

Schedule make_zero_bubble_v(const ScheduleSpec& spec) {
  const int p = spec.stages;
  const int m = spec.micro_batches;
  const int n = std::max(2 * p - 1, m);
  Schedule s{spec, std::vector<std::vector<Action>>(p)};
  for (int r = 0; r < p; ++r) {
    for (const Action& a : rank_order(r, p, n)) {
      if (a.micro_batch < m) s.ranks[r].push_back(a);
    }
  }
  return s;
}

}  // namespace conveyor::sched
