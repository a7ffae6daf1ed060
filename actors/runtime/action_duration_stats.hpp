#pragma once
// Measured action durations, gathered over steps, fed to the schedule simulator. Two
// predictions of the bubble come out: one from the mean duration of each kind per rank
// (what a planner would assume), and one replaying every step with the durations each
// action actually took (what a perfect runtime would have achieved with that work); the
// gap between the replay and the measured bubble is the runtime's own overhead.
#include <array>
#include <vector>

#include "actors/plan/protocol.hpp"
#include "actors/plan/schedule/simulator.hpp"

namespace conveyor {

class ActionDurationStats {
 public:
  explicit ActionDurationStats(const sched::Schedule& schedule);

  /// The reports of one train step.
  void add(const std::vector<StageReport>& reports);
  int steps() const { return steps_; }
  /// Mean over the added steps of the simulated bubble with each step's own durations.
  double replayed_bubble() const { return steps_ ? replayed_bubble_sum_ / steps_ : 0.0; }

  /// Per-rank mean F, B, I, W durations in µs (0 for a kind a rank never ran);
  /// communication free (in one process a message is a pointer hand-off).
  sched::SimCosts costs() const;

 private:
  struct Sum {
    double us = 0.0;
    long count = 0;
    double mean() const { return count ? us / count : 0.0; }
  };
  const sched::Schedule& schedule_;
  std::vector<std::array<Sum, 4>> sums_;  // [rank][F, B, I, W]
  int steps_ = 0;
  double replayed_bubble_sum_ = 0.0;
};

}  // namespace conveyor
