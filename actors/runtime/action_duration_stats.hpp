#pragma once
// Mean measured duration of each compute kind per rank, gathered over steps, to feed the
// schedule simulator: its predicted bubble for the measured durations is what the
// measured bubble is checked against.
#include <array>
#include <vector>

#include "actors/protocol.hpp"
#include "actors/schedule/simulator.hpp"

namespace conveyor {

class ActionDurationStats {
 public:
  explicit ActionDurationStats(int ranks);

  /// The reports of one train step.
  void add(const std::vector<StageReport>& reports);
  int steps() const { return steps_; }

  /// Per-rank mean F, B, I, W durations in µs (0 for a kind a rank never ran);
  /// communication free (in one process a message is a pointer hand-off).
  sched::SimCosts costs() const;

 private:
  struct Sum {
    double us = 0.0;
    long count = 0;
    double mean() const { return count ? us / count : 0.0; }
  };
  std::vector<std::array<Sum, 4>> sums_;  // [rank][F, B, I, W]
  int steps_ = 0;
};

}  // namespace conveyor
