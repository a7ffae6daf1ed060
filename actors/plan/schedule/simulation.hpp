#pragma once
// The one event model behind every dry run of a schedule, in simulated time (µs):
// - each rank runs its list in order, one action at a time;
// - an action starts when its rank is free and its inputs are there (dependencies.hpp):
//   F(s, i) after F(s−1, i)'s activation arrived; B/I(s, i) after F(s, i) on this rank and
//   B/I(s+1, i)'s gradient arrived; W after I on this rank;
// - in a compute-only schedule a message between ranks arrives message_us after its
//   producer ends (no cost between two chunks of one rank); in a schedule with
//   communication actions a SEND starts after its compute action, a RECV ends when the
//   SEND's message arrived and the consumer waits for its RECV. SEND and RECV take no
//   rank time unless the duration lookup gives them some (sends are asynchronous, on
//   their own stream) and messages do not contend for links;
// - when no rank can make progress before all are done the schedule deadlocks: the run
//   reports it as data (SimResult::deadlock) rather than throwing.
//
// What an action costs is a lookup, duration(action) -> µs, given to run(): per rank and
// kind (SimCosts, simulator.hpp), per model stage and kind (StageCosts, stage_costs.hpp)
// or anything else. The dependencies depend on the schedule only, so a Simulation resolves
// them once and runs any number of lookups (the partitioner simulates hundreds of cost
// vectors on one schedule).
// Pure logic: no CAF.
#include <cstddef>
#include <string>
#include <vector>

#include "actors/plan/schedule/schedule.hpp"
#include "actors/plan/schedule/sim_result.hpp"

namespace conveyor::sched {

/// A schedule with its dependencies resolved. Thread-compatible: run() is const.
class Simulation {
 public:
  /// Throws InputError, its message starting with `who` ("simulate: …"), for an action
  /// outside the spec (rank, micro-batch or chunk out of range).
  explicit Simulation(Schedule schedule, const std::string& who = "simulate");

  const Schedule& schedule() const { return schedule_; }

  /// Runs the schedule with `duration_us(action)` µs for each action (any callable
  /// double(const Action&), called once per action as it starts) and `message_us` from a
  /// send to the arrival of each message between ranks. REQUIRES: both >= 0.
  template <class DurationOf>
  SimResult run(const DurationOf& duration_us, double message_us) const {
    const auto call = [](const void* f, const Action& a) -> double {
      return (*static_cast<const DurationOf*>(f))(a);
    };
    return run_with({&duration_us, call}, message_us);
  }

 private:
  // What an action waits for: the end of ranks[rank][slot], plus message_us when the
  // input crosses ranks. slot -1: no rank runs it, the action can never start.
  struct Dep {
    int rank = 0;
    int slot = -1;
    bool message = false;
  };

  // The duration lookup, type-erased so that the event loop lives in the .cpp.
  struct Lookup {
    const void* f;
    double (*call)(const void*, const Action&);
    double operator()(const Action& a) const { return call(f, a); }
  };

  SimResult run_with(Lookup duration_us, double message_us) const;
  std::string describe(const Wait& wait) const;

  Schedule schedule_;
  bool split_ = false;      // the schedule splits the backward (gradients come from I)
  bool with_comm_ = false;  // the schedule has SEND/RECV actions
  // Flattened per action (rank by rank, in list order): action n waits for
  // deps_[first_[n] .. first_[n + 1]). Only slots are kept, which keeps the tables small
  // for the partitioner's many runs; a deadlock report resolves the actions again.
  std::vector<std::size_t> rank_begin_;  // index n of each rank's first action
  std::vector<std::size_t> first_;
  std::vector<Dep> deps_;
  std::vector<int> peaks_;
};

}  // namespace conveyor::sched
