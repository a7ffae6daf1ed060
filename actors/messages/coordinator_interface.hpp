#pragma once
// The coordinator's interface (actors/coordinator/coordinator_actor.hpp) as CAF typed
// actors, one per concern; a send or request it does not take fails to compile.
#include <caf/all.hpp>
#include <cstdint>
#include <string>

#include "actors/messages/messages.hpp"
#include "actors/plan/training_observer.hpp"

namespace conveyor {

/// The run: train to the end (the reply is the result, or the error that ended it), or
/// stop now with a reason (the hang watchdog, the liveness watch, a signal).
using CoordinatorRunApi = caf::typed_actor<
    caf::replies_to<train_atom>::with<TrainResult>,
    caf::reacts_to<stop_run_atom, std::string>>;

/// The step: the stages' reports, and the coordinator's own retries of a checkpoint's
/// capture (steps done, stop after it, polls so far, generation) and of a grow's wait for
/// the boundary's snapshots (steps done, polls so far, generation).
using CoordinatorStepApi = caf::typed_actor<
    caf::reacts_to<StageReport>,
    caf::reacts_to<capture_retry_atom, std::int64_t, bool, int, std::uint64_t>,
    caf::reacts_to<grow_retry_atom, std::int64_t, int, std::uint64_t>>;

/// Recovery: a hang (culprit rank, verdict), a failed replica group, a lost node, its
/// replacement's stages, the coordinator's own deadline for it (node, generation), and a
/// node that joined a shrunk job (issue 44's grow).
using CoordinatorRecoveryApi = caf::typed_actor<
    caf::reacts_to<stage_hang_atom, int, std::string>,
    caf::reacts_to<ReplicaGroupFailed>,
    caf::reacts_to<node_lost_atom, int, std::string>,
    caf::reacts_to<NodeStages>,
    caf::reacts_to<rejoin_deadline_atom, int, std::uint64_t>,
    caf::reacts_to<node_joined_atom, NodeStages>>;

/// The coordinator's handle.
using CoordinatorActor = CoordinatorRunApi::extend_with<CoordinatorStepApi, CoordinatorRecoveryApi>;

}  // namespace conveyor
