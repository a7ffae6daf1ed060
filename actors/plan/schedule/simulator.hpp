#pragma once
// A dry run of a schedule with one duration per rank and action kind (SimCosts), on the
// event model of simulation.hpp. Handles schedules with and without SEND/RECV actions.
// Durations apply per action, so for several chunks per rank they are per-chunk costs;
// stage_costs.hpp gives each chunk the durations of its own model stage.
#include <map>
#include <string>
#include <vector>

#include "actors/plan/schedule/schedule.hpp"
#include "actors/plan/schedule/sim_result.hpp"

namespace conveyor::sched {

struct SimCosts {
  // Durations in µs of one action on a rank: one value for every rank, or one per rank.
  std::vector<double> f_us{1.0};
  std::vector<double> b_us{2.0};
  std::vector<double> i_us{1.0};
  std::vector<double> w_us{1.0};
  double latency_us = 0.0;      // per message
  double bandwidth_gb_s = 0.0;  // GB/s = 1e9 bytes/s; unused when message_bytes == 0
  double message_bytes = 0.0;   // bytes per activation or gradient message
  // Exact durations of particular actions (e.g. replaying measured timings), keyed by
  // Action::str(true); they take precedence over the per-kind durations.
  std::map<std::string, double> action_us;

  /// The same durations on every rank, free communication.
  static SimCosts uniform(double f, double b, double i, double w);
  /// Duration of `kind` on `rank`; 0 for SEND and RECV.
  double duration_us(int rank, ActionKind kind) const;
  /// Duration of `action`: its entry in action_us, else duration_us(rank, kind).
  double duration_us(const Action& action) const;
  /// Time from a send to the arrival: latency + bytes / bandwidth.
  double message_us() const;
};

/// Runs the schedule. Throws InputError for costs of the wrong size or negative values,
/// and for actions outside the spec (rank, micro-batch or chunk out of range); a deadlock
/// is reported in the result.
SimResult simulate(const Schedule& schedule, const SimCosts& costs = {});

}  // namespace conveyor::sched
