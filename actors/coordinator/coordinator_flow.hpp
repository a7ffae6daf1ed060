#pragma once
// The coordinator's step flow, shared by its behavior (coordinator_actor.cpp) and its
// recovery (coordinator_recovery.cpp). Internal to actors/coordinator/.
#include <caf/all.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "actors/coordinator/coordinator_actor.hpp"

namespace conveyor::coordinator_flow {

using Self = caf::stateful_actor<CoordinatorState>;

/// Sends every stage its plan for the next round of `phase` (the step is st.step).
void start_round(Self* self, Phase phase);
/// Ends the run with `why`: the pending train request gets it, every stage is stopped.
void fail(Self* self, const std::string& why);
/// Goes on from a boundary where every stage holds the state after `steps_done` steps:
/// the evaluation that followed step steps_done - 1 when it was due and has not finished,
/// else train step steps_done.
void resume_at_boundary(Self* self, std::int64_t steps_done);

/// A failure to recover from.
struct Failure {
  std::string fault;          // crash | hang | nan | node
  std::vector<int> stages;    // where it was seen
  std::vector<int> respawn;   // ranks whose actor is replaced (dead, hung, or lost with a node)
  std::string reason;         // as detected, for the log and the error
};

/// The recovery under way (CoordinatorState::recovery).
struct PendingRecovery {
  Failure failure;
  std::int64_t failed_step = 0;
  std::int64_t restored = 0;  // the snapshot every stage goes back to
  std::chrono::steady_clock::time_point detected;
};

/// Starts recovering from `failure` when the run can (fault.policy restart or on_nan
/// rollback, snapshots kept, a way to respawn when ranks must be) and returns true; the
/// run then goes on by itself. False: the caller fails the run with the reason.
bool try_recover(Self* self, Failure failure);

/// Whether `rank` runs in another process than the coordinator.
bool is_remote(const CoordinatorState& st, int rank);
/// A stage of another node that keeps its snapshots to itself (remote_markers) took one
/// after `steps_done` steps when one was due (before its reply): node 0's store notes it.
void note_remote_snapshot(CoordinatorState& st, int rank, std::int64_t steps_done);
/// Drops rank's actor: one of this process is respawned at once; one of another process
/// is respawned there (RespawnStage), or, when its process is lost (`lost_why`: how it
/// was lost), waits for its node's replacement (coordinator_rejoin.cpp).
void replace_stage(Self* self, int rank, const std::string* lost_why);
/// Once no replacement is awaited: every stage aborts the round and loads the snapshot.
void restore_when_replaced(Self* self);

/// Node `node`'s process is lost: wait for its replacement (or fail the run).
void on_node_lost(Self* self, int node, const std::string& why);
/// A lost node's replacement announced its stages (node 0's directory).
void on_node_rejoined(Self* self, NodeStages& stages);
/// fault.rejoin_timeout_s after node `node` was lost in recovery `generation`.
void on_rejoin_deadline(Self* self, int node, std::uint64_t generation);

/// Before the first plan when the run keeps snapshots: every stage snapshots its starting
/// state (so a failure in the first step can roll back); then `then` runs.
void take_first_snapshot(Self* self, std::function<void()> then);

}  // namespace conveyor::coordinator_flow
