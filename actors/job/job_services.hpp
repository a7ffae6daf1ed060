#pragma once
// The handles a job has only while it runs, beside its plan (actors/plan/job_plan.hpp):
// what the app hands in (the trace recorder, the checkpoint hook, fault injection) and
// what the composition root makes for the plan (make_services, actors/runtime/). No CAF.
#include <memory>

#include "actors/fault/message_fault.hpp"
#include "actors/fault/snapshot_store.hpp"
#include "actors/job/checkpoint_hook.hpp"
#include "actors/plan/job_plan.hpp"
#include "actors/plan/training_observer.hpp"
#include "actors/trace/stage_progress.hpp"
#include "actors/trace/trace_session.hpp"

namespace conveyor {

class ReplicaGroups;    // actors/job/replica_groups.hpp
class NodeShardWrites;  // actors/stage/own_shard_write.hpp

struct JobServices {
  // Given by the app.
  // The trace recorder (actors/trace/): null when not tracing.
  std::shared_ptr<trace::TraceSession> trace;
  // Asked at every step boundary (checkpoint_hook.hpp); null: no checkpoints. Not owned:
  // it outlives the run.
  CheckpointHook* checkpoints = nullptr;
  // fault.inject (ScriptedFaults) or a test's own: faults injected on purpose; null: none.
  std::shared_ptr<MessageFault> fault;

  // Made by the composition root from the plan (actors/runtime/job_setup.hpp).
  // The stage groups of gradient averaging: with replicas > 1, and with one replica for
  // model.tie_embeddings (its group of two): test plan.replicas > 1, not this pointer,
  // for data parallelism.
  std::shared_ptr<ReplicaGroups> replica_groups;
  // In-memory snapshots: exactly when plan.keeps_snapshots().
  std::shared_ptr<SnapshotStore> snapshots;
  // Every stage's published state, for the hang watchdog: with plan.watchdog_timeout_s > 0.
  std::shared_ptr<trace::ProgressBoard> progress;
  // checkpoint.writers every_node on node k > 0: the queue of its stages' own shard writes.
  std::shared_ptr<NodeShardWrites> shard_writes;
};

/// What every actor of a run holds: the plan and the services, shared and immutable.
struct Job {
  JobPlan plan;
  JobServices services;
};

}  // namespace conveyor
