#pragma once
// Durations per MODEL stage, for schedules with several chunks per rank.
//
// SimCosts (simulator.hpp) gives one duration per rank and kind, so every chunk of a rank
// costs the same. When the model is cut unevenly (partitioner.hpp) chunk 0 and chunk 1 of
// a rank hold different layers and cost different times: StageCosts gives one duration per
// model stage (schedule.model_stages() entries, indexed by schedule.model_stage(rank,
// chunk)). Both are duration lookups for the one event model (simulation.hpp).
//
// The run is on the compute-only schedule: communication actions in the input are
// ignored and timings are reported for the compute actions only. That times like the
// schedule with SEND/RECV actions (they take no rank time), and with one chunk per rank
// (model stage r is rank r) it is exactly simulate() with the same per-rank durations.
// Pure logic: no CAF.
#include <vector>

#include "actors/plan/schedule/schedule.hpp"
#include "actors/plan/schedule/sim_result.hpp"
#include "actors/plan/schedule/simulation.hpp"

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
  /// Duration of `kind` in `model_stage`; 0 for SEND and RECV.
  double duration_us(int model_stage, ActionKind kind) const;
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

  SimResult run(const StageCosts& costs) const;

 private:
  Simulation simulation_;         // of the compute-only schedule
  std::vector<int> model_stage_;  // [rank * chunks per rank + chunk], for the lookup
};

}  // namespace conveyor::sched
