#pragma once
// Straggler detection (fault.straggler_factor, fault.straggler_steps): a pipeline rank whose
// busy (compute) time in a train step exceeds `factor` times the median busy time of its
// peers (every other rank) in that step, for `steps` consecutive steps, is a straggler. It is reported once
// as it crosses that line, not again while it stays slow; after a step under the factor
// (recovered) it starts a new episode and is reported again once it has been slow for
// `steps` consecutive steps again.
//
// Why the median of the peers: a rank is measured against the others, never against
// itself (with 2 ranks, against the other one), and a second slow rank moves the median
// by at most one position where it would drag a mean up and hide both.
//
// Pure logic, no CAF; not thread-safe (one caller, the metrics observer).
#include <cstdint>
#include <vector>

#include "actors/runtime/training_job.hpp"

namespace conveyor {

struct StragglerReport {
  int stage = 0;              // the pipeline rank
  std::int64_t step = 0;      // the train step at which it crossed the line
  double busy_ms = 0;         // its busy time in that step
  double peer_median_ms = 0;  // the median busy time of the other ranks in that step
  double ratio = 0;           // busy_ms / peer_median_ms
  int steps = 0;              // consecutive slow steps so far (== the detector's `steps`)
};

class StragglerDetector {
 public:
  /// factor > 1; steps >= 1. Throws std::invalid_argument otherwise.
  StragglerDetector(double factor, int steps);

  /// Called once per train step with its metrics (stage_busy_ms per rank); returns the
  /// ranks that became stragglers at this step. Steps with fewer than 2 ranks or a median
  /// busy time of 0 are ignored (they neither count nor reset a streak).
  std::vector<StragglerReport> observe(const StepMetrics& m);

  double factor() const { return factor_; }
  int steps() const { return steps_; }

 private:
  double factor_;
  int steps_;
  std::vector<int> streak_;     // consecutive slow steps, per rank
  std::vector<bool> reported_;  // reported in the current episode, per rank
};

}  // namespace conveyor
