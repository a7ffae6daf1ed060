// GPipe: every rank runs all forwards, then all backwards. Peak activations: m per rank.
#include "actors/plan/schedule/generators.hpp"

namespace conveyor::sched {

Schedule make_gpipe(const ScheduleSpec& spec) {
  Schedule s{spec, std::vector<std::vector<Action>>(spec.stages)};
  for (int r = 0; r < spec.stages; ++r) {
    auto& list = s.ranks[r];
    // 1. forwards, in micro-batch order
    for (int i = 0; i < spec.micro_batches; ++i) list.push_back({r, ActionKind::F, i, 0});
    // 2. backwards, ascending, so weight gradients accumulate in micro-batch order
    for (int i = 0; i < spec.micro_batches; ++i) list.push_back({r, ActionKind::B, i, 0});
  }
  return s;
}

}  // namespace conveyor::sched
