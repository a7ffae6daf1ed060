#pragma once
// What a run reports while it trains, and to whom: the coordinator's metrics of each step,
// evaluation and recovery, handed to a TrainingObserver in step order, and the result it
// returns. Plain data, no CAF.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actors/plan/protocol.hpp"
#include "actors/plan/job_plan.hpp"
#include "actors/plan/replan_event.hpp"
#include "kernels/io/safetensors.hpp"

namespace conveyor {

/// What the coordinator reports after each train step.
struct StepMetrics {
  std::int64_t step = 0;
  double loss = 0.0;         // mean over the step's micro-batches
  double lr = 0.0;
  double grad_norm = 0.0;    // before clipping
  double step_ms = 0.0;      // plans sent → every optimizer step done
  double tokens_per_s = 0.0;
  double bubble = 0.0;       // measured: idle share of ranks over the step's compute span
  std::vector<double> stage_busy_ms;  // per rank
  /// Data parallelism: the gradient averaging of the step, mean over the stage actors
  /// (reduction_cost in step_accounting.hpp); 0 with one replica.
  double allreduce_ms = 0.0;
  double allreduce_exposed_ms = 0.0;
  /// optim.shard_state: the weights' all-gather after the update, mean over the stage
  /// actors; 0 without.
  double allgather_ms = 0.0;
  /// A non-finite step skipped under fault.on_nan skip: no update was applied; the ranks
  /// whose loss or gradients were not finite.
  bool skipped = false;
  std::vector<int> nonfinite_ranks;
};

/// One recovery: what failed, where, and what it cost (a `recovery` row of metrics.jsonl).
struct RecoveryEvent {
  std::string fault;             // crash | hang | nan | node | collective (a replica group failed)
  std::vector<int> stages;       // the failed (crash, hang) or non-finite (nan) ranks
  std::int64_t step = 0;         // the train step under way when it was detected
  std::int64_t restored_step = 0;  // completed steps restored; steps from here are replayed
  std::vector<int> respawned;    // ranks whose actor was replaced
  // Where the state came from (RestoreSource::describe): "snapshot", "replica 0" (a
  // respawned stage copied replica 0's), "kept" (replicas, nothing respawned).
  std::string restored_from = "snapshot";
  double recovery_ms = 0;        // detection → every stage restored, replay starting
  int restarts_in_window = 0;    // recoveries within fault.window_s, this one included
  std::string reason;            // the failure as detected
};

struct EvalMetrics {
  std::int64_t step = 0;  // evaluated after this train step
  double val_loss = 0.0;
};

/// Receives progress from the coordinator's thread, in step order.
class TrainingObserver {
 public:
  virtual ~TrainingObserver() = default;
  virtual void on_step(const StepMetrics&, const std::vector<StageReport>& reports) = 0;
  virtual void on_eval(const EvalMetrics&) = 0;
  /// After a recovery, before the replay starts.
  virtual void on_recovery(const RecoveryEvent&) {}
  /// A process of the job was lost and its replacement is awaited for `wait_s` seconds
  /// (fault.rejoin_timeout_s): the run is waiting, not hung.
  virtual void on_node_lost(int /*node*/, const std::string& /*why*/, double /*wait_s*/) {}
  /// The job moved onto another layout (issue 44: a shrink), restored and about to replay:
  /// `plan` and `node_of_rank` are the new layout's, `generation` counts the re-plans (1
  /// for the first). Before on_recovery of the same recovery.
  virtual void on_replan(const ReplanEvent& /*event*/, const JobPlan& /*plan*/,
                         const std::vector<int>& /*node_of_rank*/, int /*generation*/) {}
};

struct TrainResult {
  std::vector<NamedTensor> weights;  // the whole model, in global parameter order (replica 0)
  // parallel.data > 1: every replica's whole model, by replica (weights is the first);
  // empty with one replica. Replicas step on identical gradients: these must be bitwise equal.
  std::vector<std::vector<NamedTensor>> replica_weights;
  double final_loss = 0.0;
  // The last evaluation's loss; none when the run evaluated nothing (a stop dropped the
  // evaluation after the last step and there was none before it in this process).
  std::optional<double> final_val_loss;
  // A stop (CheckpointHook::stop_during_eval) dropped the evaluation after the last step:
  // final_val_loss is the one before it.
  bool final_eval_dropped = false;
};

}  // namespace conveyor
