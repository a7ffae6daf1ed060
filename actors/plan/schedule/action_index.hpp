#pragma once
// Where each action sits in its rank's list: the slot of the first (rank, kind, chunk,
// micro-batch) in O(1), for the simulators' dependency lookups. Pure.
#include <cstddef>
#include <vector>

#include "actors/plan/schedule/schedule.hpp"

namespace conveyor::sched {

inline constexpr int kActionKinds = 8;  // F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B

/// Slot of the first (rank, kind, micro-batch, chunk) in its rank's list, or -1.
class ActionIndex {
 public:
  explicit ActionIndex(const Schedule& s)
      : chunks_(s.chunks_per_rank()), micro_batches_(s.spec.micro_batches) {
    slots_.resize(s.ranks.size());
    for (std::size_t r = 0; r < s.ranks.size(); ++r) {
      slots_[r].assign(static_cast<std::size_t>(kActionKinds * chunks_ * micro_batches_), -1);
      for (std::size_t k = 0; k < s.ranks[r].size(); ++k) {
        int& slot = slots_[r][key(s.ranks[r][k])];
        if (slot < 0) slot = static_cast<int>(k);
      }
    }
  }
  int slot(const Action& a) const { return slots_[a.stage][key(a)]; }

 private:
  std::size_t key(const Action& a) const {
    return static_cast<std::size_t>((static_cast<int>(a.kind) * chunks_ + a.chunk) * micro_batches_ +
                                    a.micro_batch);
  }
  int chunks_;
  int micro_batches_;
  std::vector<std::vector<int>> slots_;
};

}  // namespace conveyor::sched
