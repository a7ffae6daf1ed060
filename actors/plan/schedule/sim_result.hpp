#pragma once
// What a dry run of a schedule reports (simulation.hpp): per-action timings, busy and idle
// time per rank, the bubble, peak activations, and a deadlock as data.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "actors/plan/schedule/action.hpp"

namespace conveyor::sched {

struct TimedAction {
  Action action;
  double start_us = 0.0;
  double end_us = 0.0;
};

/// A rank that could not go on in a deadlock: its next action and the action it waits for.
struct Wait {
  int rank = 0;
  std::size_t slot = 0;  // index of `action` in the rank's list
  Action action;
  Action needs;          // needs.stage is the rank that should run it
  bool needs_exists = true;  // false: no rank's list holds `needs`
};

struct SimResult {
  double makespan = 0.0;             // µs, from 0 (every rank starts free) to the last end
  std::vector<double> busy;          // per rank, µs of compute
  std::vector<double> idle;          // per rank, makespan − busy
  std::vector<double> stage_bubble;  // per rank, idle / makespan
  double bubble = 0.0;               // sum(idle) / (ranks × makespan)
  std::vector<int> peak_activations; // per rank, see activations.hpp
  /// timings[r][k]: the k-th action of rank r. In a deadlock only the actions that ran.
  std::vector<std::vector<TimedAction>> timings;
  /// Set when the run stopped short: "deadlock: rank 1 waits for F mb 3 from rank 0; …".
  std::optional<std::string> deadlock;
  std::vector<Wait> waits;  // the blocked ranks, when deadlocked

  bool ok() const { return !deadlock.has_value(); }
};

}  // namespace conveyor::sched
