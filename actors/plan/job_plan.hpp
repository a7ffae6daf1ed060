#pragma once
// What one training run is, resolved once from the config: the model, where each piece
// runs, the schedule, the data, the optimizer and the recovery settings. Plain data and
// pure functions over it: `conveyor sched` prints it (plan.json) with no job running, and
// every derived value (a replica's micro-batches, the evaluation wave, an actor's place)
// is computed here and nowhere else. The handles of a running job are JobServices
// (actors/job/job_services.hpp).
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/plan/eval_plan.hpp"
#include "actors/plan/placement.hpp"
#include "actors/plan/recovery_policy.hpp"
#include "actors/plan/replica_placement.hpp"
#include "actors/plan/schedule/schedule.hpp"
#include "actors/plan/stage_data.hpp"
#include "kernels/model/gpt_config.hpp"
#include "kernels/model/stage_model.hpp"
#include "kernels/optim/adamw.hpp"
#include "kernels/optim/lr_schedule.hpp"

namespace conveyor {

struct JobPlan {
  GptConfig model;
  Placement placement;       // one replica's pipeline
  sched::Schedule schedule;  // compute actions per rank of one replica
  StageData data;            // micro_batches: the step's global count, over all replicas
  // parallel.data: replicas of the pipeline, R·P stage actors (actors/plan/replica_placement.hpp);
  // each replica runs `schedule` on its share of data.micro_batches (replica_micro_batches).
  int replicas = 1;
  // The replicas whose gradient average the run reproduces (issue 44): a job shrunk to
  // fewer replicas keeps the configured parallel.data here, and each running replica
  // computes the shares of the configured replicas it stands for (configured_shares:
  // contiguous, the first R mod R' taking one more; StageData::gradient_shares), so the
  // steps' weights stay those of the configured layout. 0: the same as `replicas` (every
  // run that did not shrink replicas).
  int configured_replicas = 0;
  // By replica, where the replicas' micro-batch counts differ (R' running replicas not
  // dividing the R configured): each one's schedule over its own micro-batches. Empty:
  // every replica runs `schedule`.
  std::vector<sched::Schedule> replica_schedules;
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
  // checkpoint.every, known on every node (the hook is node 0's): without buddy copies a
  // lost node's replacement goes back to the newest checkpoint, so it can rejoin only
  // when checkpoints are written (actors/runtime/run_job.cpp).
  std::int64_t checkpoint_every = 0;
  // checkpoint.writers every_node: across processes each node writes its own stages'
  // shards of a checkpoint (actors/checkpoint/staged_shards.hpp), node 0 waiting at most
  // remote_shard_timeout for each (checkpoint.remote_timeout_s).
  bool nodes_write_shards = false;
  std::chrono::milliseconds remote_shard_timeout{std::chrono::minutes(10)};
  NanPolicy on_nan = NanPolicy::abort;
  RecoverySettings recovery;
  double watchdog_timeout_s = 0;  // deadline of every action and wait; 0: no watchdog

  ReplicaLayout replica_layout() const {
    return ReplicaLayout{replicas, static_cast<int>(placement.ranks.size())};
  }
  /// Stage actors of the run: every replica's pipeline ranks.
  int stage_actors() const { return replica_layout().actors(); }
  /// Train micro-batches of one replica per step (every replica takes the same number:
  /// the config requires parallel.data to divide pipeline.micro_batches).
  int replica_micro_batches() const { return replica_share(0).count; }
  /// Micro-batches per wave of an evaluation (actors/plan/eval_plan.hpp).
  int eval_wave() const {
    return eval_wave_size(replica_micro_batches(), placement.model_stages(), eval_batches);
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
  /// Whether the running replicas stand for more configured ones (a shrunk job).
  bool stands_for_configured() const { return configured_replicas > replicas; }
  /// The configured replicas whose shares replica `replica` computes (one: its own).
  ConfiguredShares replica_shares(int replica) const {
    return stands_for_configured() ? configured_shares(configured_replicas, replicas, replica)
                                   : ConfiguredShares{replica, 1};
  }
  /// Configured replicas' shares replica `replica` computes (StageData::gradient_shares).
  int gradient_shares(int replica) const { return replica_shares(replica).count; }
  /// The step's global micro-batches replica `replica` computes.
  MicroBatchShare replica_share(int replica) const {
    return stands_for_configured()
               ? shares_micro_batches(data.micro_batches, configured_replicas, replicas, replica)
               : micro_batch_share(data.micro_batches, replicas, replica);
  }
  /// The compute actions of replica `replica`'s pipeline (replica_schedules).
  const sched::Schedule& schedule_of(int replica) const {
    return replica_schedules.empty() ? schedule : replica_schedules.at(static_cast<std::size_t>(replica));
  }
  StageData actor_data(int actor) const {
    if (replicas == 1 && !stands_for_configured()) return data;
    const int replica = replica_layout().replica_of(actor);
    const auto share = replica_share(replica);
    StageData d = data;
    d.micro_batches = share.count;
    d.first_micro_batch = share.first;
    d.gradient_shares = gradient_shares(replica);
    // Several running replicas of a shrunk job gather their shares (share_gradients.hpp).
    if (replicas > 1 && stands_for_configured())
      for (int r = 0; r < replicas; ++r) d.replica_shares.push_back(gradient_shares(r));
    return d;
  }
  /// Whether every stage keeps in-memory snapshots (actors/fault/snapshot_store.hpp):
  /// for fault.policy restart and fault.on_nan rollback, unless fault.snapshot_every is 0.
  bool keeps_snapshots() const {
    return recovery.snapshot_every > 0 &&
           (recovery.policy == FaultPolicy::restart || on_nan == NanPolicy::rollback);
  }
  /// Whether a failure can be recovered in place: from the in-memory snapshots, or, with
  /// replicas, by copying a healthy replica's state (actors/fault/restore_source.hpp),
  /// which needs no snapshot for a failure outside the optimizer step.
  bool recovers_in_place() const {
    return keeps_snapshots() ||
           (replicas > 1 &&
            (recovery.policy == FaultPolicy::restart || on_nan == NanPolicy::rollback));
  }
  /// Whether every pipeline rank computes in host memory (buddy copies, rejoining).
  bool all_cpu() const {
    for (const auto& r : placement.ranks)
      if (!r.device.is_cpu()) return false;
    return true;
  }
  std::int64_t tokens_per_step() const {
    return static_cast<std::int64_t>(data.micro_batches) * data.micro_batch_size * model.seq_len;
  }
};

}  // namespace conveyor
