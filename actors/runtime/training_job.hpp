#pragma once
// Everything one training run needs, resolved from the config: the model, where each
// piece runs, the schedule, the data and the optimizer. Plain data, built by the app.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/coordinator/checkpoint_hook.hpp"
#include "actors/fault/fault_policy.hpp"
#include "actors/fault/snapshot_store.hpp"
#include "actors/plan/eval_plan.hpp"
#include "actors/plan/placement.hpp"
#include "actors/plan/replica_placement.hpp"
#include "actors/plan/schedule/schedule.hpp"
#include "actors/stage/stage_worker.hpp"
#include "actors/trace/message_fault.hpp"
#include "actors/trace/stage_progress.hpp"
#include "actors/trace/trace_session.hpp"
#include "kernels/model/gpt_config.hpp"
#include "kernels/optim/adamw.hpp"
#include "kernels/optim/lr_schedule.hpp"

namespace conveyor {

class ReplicaGroups;    // actors/runtime/replica_groups.hpp
class NodeShardWrites;  // actors/cluster/own_shard_write.hpp

struct TrainingJob {
  GptConfig model;
  Placement placement;       // one replica's pipeline
  sched::Schedule schedule;  // compute actions per rank of one replica
  StageData data;            // micro_batches: the step's global count, over all replicas
  // parallel.data: replicas of the pipeline, R·P stage actors (actors/plan/replica_placement.hpp);
  // each replica runs `schedule` on data.micro_batches / replicas micro-batches.
  int replicas = 1;
  // The replicas' stage groups (gradient averaging): made by run_training when replicas > 1.
  // Also made with one replica for model.tie_embeddings (its group of two): test
  // `replicas > 1`, not this pointer, for data parallelism.
  std::shared_ptr<ReplicaGroups> replica_groups;
  // The device of every stage actor (replica-major) when replicas > 1; empty: each actor
  // computes on its pipeline rank's device (placement).
  std::vector<Device> actor_devices;
  double collective_timeout_s = 60;  // joining a replica group; each gradient average
  // optim.shard_state (ZeRO-1, kernels/optim/optimizer_shard.hpp): with replicas > 1 each
  // replica keeps and updates its part of every stage's AdamW state, then the replicas
  // all-gather the weights; checkpoints merge the parts.
  bool shard_optimizer_state = false;
  AdamWConfig adamw;
  LrSchedule lr;
  double grad_clip = 1.0;  // global gradient-norm clip; 0 disables
  std::int64_t steps = 1;
  std::int64_t eval_every = 0;  // 0: evaluate only after the last step
  int eval_batches = 1;
  int threads_per_stage = 1;  // CPU kernel threads of each stage actor
  std::string partition = "uniform";  // how blocks were split: uniform | explicit | auto
  std::string partition_reason;       // what was chosen and why (plan.json, the log)
  StageModelFactory make_model = make_cpu_stage_model;  // per device kind
  // Stage actors on threads of their own (detached), or on CAF's work-stealing
  // scheduler with one worker per stage that polls before it sleeps (lower message
  // latency; compute still never shares a worker with another stage's compute).
  bool detached_stages = true;
  // Tracing and hang diagnosis (actors/trace/). The recorder: null when not tracing.
  std::shared_ptr<trace::TraceSession> trace;
  // Checkpoints (actors/coordinator/checkpoint_hook.hpp): asked at every step boundary;
  // null: none. Not owned: it outlives the run.
  CheckpointHook* checkpoints = nullptr;
  // checkpoint.every, known on every node (the hook is node 0's): without buddy copies a
  // lost node's replacement goes back to the newest checkpoint, so it can rejoin only
  // when checkpoints are written (actors/cluster/run_node.cpp).
  std::int64_t checkpoint_every = 0;
  // checkpoint.writers every_node: across processes each node writes its own stages'
  // shards of a checkpoint (actors/checkpoint/staged_shards.hpp), node 0 waiting at most
  // remote_shard_timeout for each (checkpoint.remote_timeout_s). run_node makes node k's
  // queue for those writes (shard_writes) and node 0's book of them.
  bool nodes_write_shards = false;
  std::chrono::milliseconds remote_shard_timeout{std::chrono::minutes(10)};
  std::shared_ptr<NodeShardWrites> shard_writes;
  NanPolicy on_nan = NanPolicy::abort;
  RecoverySettings recovery;
  // In-memory snapshots (actors/fault/snapshot_store.hpp): made by run_training when
  // recovery.policy is restart or on_nan is rollback; null otherwise.
  std::shared_ptr<SnapshotStore> snapshots;
  double watchdog_timeout_s = 0;  // deadline of every action and wait; 0: no watchdog
  std::shared_ptr<trace::ProgressBoard> progress;  // set by run_training with a watchdog
  std::shared_ptr<MessageFault> fault;             // tests only: loses stage messages

  ReplicaLayout replica_layout() const {
    return ReplicaLayout{replicas, static_cast<int>(placement.ranks.size())};
  }
  /// Stage actors of the run: every replica's pipeline ranks.
  int stage_actors() const { return replica_layout().actors(); }
  /// Micro-batches per wave of an evaluation (actors/plan/eval_plan.hpp).
  int eval_wave() const {
    return eval_wave_size(data.micro_batches / replicas, placement.model_stages(), eval_batches);
  }
  /// Whether the replicas split the AdamW state (shard_optimizer_state with R > 1).
  bool shards_optimizer_state() const { return shard_optimizer_state && replicas > 1; }
  /// What actor `actor` computes with: its rank placement and its replica's share of data.
  RankPlacement actor_placement(int actor) const {
    RankPlacement rank = replica_rank_placement(placement, replica_layout(), actor);
    if (!actor_devices.empty()) rank.device = actor_devices.at(static_cast<std::size_t>(actor));
    return rank;
  }
  /// The stage actor of `actor`'s replica that holds `model_stage`.
  int actor_of_model_stage(int actor, int model_stage) const {
    const auto layout = replica_layout();
    return layout.actor(layout.replica_of(actor), placement.chunk_of(model_stage).rank);
  }
  StageData actor_data(int actor) const {
    if (replicas == 1) return data;
    const auto share =
        micro_batch_share(data.micro_batches, replicas, replica_layout().replica_of(actor));
    StageData d = data;
    d.micro_batches = share.count;
    d.first_micro_batch = share.first;
    return d;
  }

  /// Whether a failure can be recovered in place: from the in-memory snapshots, or, with
  /// replicas, by copying a healthy replica's state (actors/fault/restore_source.hpp),
  /// which needs no snapshot for a failure outside the optimizer step.
  bool recovers_in_place() const {
    return snapshots != nullptr ||
           (replicas > 1 &&
            (recovery.policy == FaultPolicy::restart || on_nan == NanPolicy::rollback));
  }

  std::int64_t tokens_per_step() const {
    return static_cast<std::int64_t>(data.micro_batches) * data.micro_batch_size * model.seq_len;
  }
};

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
