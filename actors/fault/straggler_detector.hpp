#pragma once
// Straggler detection (fault.straggler_factor, fault.straggler_steps): a pipeline rank that
// becomes much slower than it was, measured against its peers. Each step gives every rank
// a ratio: its busy (compute) time over the median busy time of the other ranks. The first
// kBaselineSteps steps set each rank's baseline ratio (their median): a stage that is
// heavier by design (the one with the LM head, an uneven split) has a high baseline and is
// not a straggler for it. Afterwards a rank whose ratio exceeds `factor` x its baseline for
// `steps` consecutive steps is a straggler: reported once as it crosses that line, not
// again while it stays slow; after a step under the line it starts a new episode.
//
// Why against the peers' median rather than its own busy time alone: a whole pipeline that
// slows down together (a shared disk, thermal throttling of every device) is not a
// straggler, and one slow rank moves the median of the others by at most one position.
// A rank slow from the very first step shows as imbalance (bubble, `trace summary`), not here.
//
// Pure logic, no CAF; not thread-safe (one caller, the metrics observer).
#include <cstdint>
#include <vector>

#include "actors/plan/training_observer.hpp"

namespace conveyor {

struct StragglerReport {
  int stage = 0;              // the pipeline rank
  std::int64_t step = 0;      // the train step at which it crossed the line
  double busy_ms = 0;         // its busy time in that step
  double peer_median_ms = 0;  // the median busy time of the other ranks in that step
  double ratio = 0;           // busy_ms / peer_median_ms
  double baseline_ratio = 0;  // that ratio over the first kBaselineSteps steps (median)
  int steps = 0;              // consecutive slow steps so far (== the detector's `steps`)
};

class StragglerDetector {
 public:
  static constexpr int kBaselineSteps = 3;
  /// factor > 1; steps >= 1. Throws std::invalid_argument otherwise.
  StragglerDetector(double factor, int steps);

  /// Called once per train step with its metrics (stage_busy_ms per rank); returns the
  /// ranks that became stragglers at this step. Steps with fewer than 2 ranks or a peer
  /// median of 0 are ignored (they neither count nor reset a streak).
  std::vector<StragglerReport> observe(const StepMetrics& m);

  double factor() const { return factor_; }
  int steps() const { return steps_; }

 private:
  double factor_;
  int steps_;
  std::vector<std::vector<double>> early_;  // ratios of the baseline steps, per rank
  std::vector<double> baseline_;            // per rank, once kBaselineSteps were seen
  std::vector<int> streak_;     // consecutive slow steps, per rank
  std::vector<bool> reported_;  // reported in the current episode, per rank
};

}  // namespace conveyor
