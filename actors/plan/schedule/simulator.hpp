#pragma once
// A dry run of a schedule in simulated time (µs). Event model:
// - each rank runs its list in order, one action at a time;
// - an action starts when its rank is free and its inputs are there (dependencies.hpp):
//   F(s, i) after F(s−1, i)'s activation arrived; B/I(s, i) after F(s, i) on this rank and
//   B/I(s+1, i)'s gradient arrived; W after I on this rank;
// - in a compute-only schedule a message between ranks arrives message_us() after its
//   producer ends (no cost between two chunks of one rank); in a schedule with
//   communication actions a SEND starts after its compute action, a RECV ends when the
//   SEND's message arrived and the consumer waits for its RECV. SEND and RECV take no
//   rank time (sends are asynchronous, on their own stream) and messages do not contend
//   for links;
// - when no rank can make progress before all are done the schedule deadlocks: simulate
//   reports it as data (SimResult::deadlock) rather than throwing.
// Durations apply per action, so for several chunks per rank they are per-chunk costs.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <map>
#include <string>

#include "actors/plan/schedule/schedule.hpp"

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

/// Runs the schedule. Throws InputError for costs of the wrong size or negative values,
/// and for actions outside the spec (rank, micro-batch or chunk out of range); a deadlock
/// is reported in the result.
SimResult simulate(const Schedule& schedule, const SimCosts& costs = {});

}  // namespace conveyor::sched
