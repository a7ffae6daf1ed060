#pragma once
// The coordinator's step flow, shared by its behavior (coordinator_actor.cpp) and its
// recovery (coordinator_recovery.cpp). Internal to actors/coordinator/.
#include <caf/all.hpp>
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
  std::string fault;          // crash | hang | nan
  std::vector<int> stages;    // where it was seen
  std::vector<int> respawn;   // ranks whose actor is replaced (dead or hung)
  std::string reason;         // as detected, for the log and the error
};

/// Starts recovering from `failure` when the run can (fault.policy restart or on_nan
/// rollback, snapshots kept, a way to respawn when ranks must be) and returns true; the
/// run then goes on by itself. False: the caller fails the run with the reason.
bool try_recover(Self* self, Failure failure);

/// Before the first plan when the run keeps snapshots: every stage snapshots its starting
/// state (so a failure in the first step can roll back); then `then` runs.
void take_first_snapshot(Self* self, std::function<void()> then);

}  // namespace conveyor::coordinator_flow
