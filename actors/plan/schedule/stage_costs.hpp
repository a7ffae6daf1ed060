#pragma once
// Simulation with durations per MODEL stage, for schedules with several chunks per rank.
//
// SimCosts (simulator.hpp) gives one duration per rank and kind, so every chunk of a rank
// costs the same. When the model is cut unevenly (partitioner.hpp) chunk 0 and chunk 1 of
// a rank hold different layers and cost different times: StageCosts gives one duration per
// model stage (schedule.model_stages() entries, indexed by schedule.model_stage(rank,
// chunk)), and simulate_stages() looks each action's duration up by its chunk.
//
// - With one chunk per rank model stage r is rank r: simulate_stages() builds the per-rank
//   SimCosts and calls simulate() on the compute-only schedule, so the two agree exactly.
// - With several chunks it runs the same event model as simulate() (see simulator.hpp)
//   on the compute-only schedule: a message between two ranks arrives message_us after
//   its producer ends, a hand-off between two chunks of one rank is free. That is also
//   what simulate() computes for the schedule with SEND/RECV actions (they take no rank
//   time), so communication actions in the input are ignored and timings are reported for
//   the compute actions only. With equal costs for every chunk of a rank the result equals
//   simulate()'s (tests/actors/plan/schedule/partitioner_test.cpp checks every generator).
// Pure logic: no CAF.
#include <memory>
#include <vector>

#include "actors/plan/schedule/schedule.hpp"
#include "actors/plan/schedule/simulator.hpp"

namespace conveyor::sched {

struct StageCosts {
  // µs of one action of each model stage; every vector has model_stages() entries.
  std::vector<double> f_us;
  std::vector<double> b_us;  // full backward (gpipe, 1f1b, interleaved-1f1b): usually I + W
  std::vector<double> i_us;
  std::vector<double> w_us;
  double message_us = 0.0;  // from a send to the arrival, for each message between ranks

  /// B = I + W for every stage.
  static StageCosts from_fiw(std::vector<double> f, std::vector<double> i, std::vector<double> w,
                             double message_us = 0.0);
};

/// Runs `schedule` with per-model-stage durations. Throws InputError when a vector's size is
/// not schedule.model_stages() or a value is negative; a deadlock is reported in the result
/// (SimResult::deadlock), as simulate() does.
SimResult simulate_stages(const Schedule& schedule, const StageCosts& costs);

/// simulate_stages for many cost vectors on one schedule (the partitioner's search): the
/// dependencies are resolved once, in the constructor. run(c) == simulate_stages(s, c).
/// Thread-compatible: run() is const.
class StageSimulator {
 public:
  /// Throws InputError for an action outside the schedule's spec.
  explicit StageSimulator(const Schedule& schedule);
  ~StageSimulator();
  StageSimulator(StageSimulator&&) noexcept;
  StageSimulator& operator=(StageSimulator&&) noexcept;

  SimResult run(const StageCosts& costs) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace conveyor::sched
