#pragma once
// The stage actor's interface (actors/stage/stage_actor.hpp) as CAF typed actors, one per
// concern; a send or request the stage does not take fails to compile. Fault injection
// has no messages: the stage's worker consults JobServices::fault (actors/fault/) where a
// fault is due.
//
// One error style for every request: a handler whose body throws ends the stage with the
// error (naming the stage and the problem), and the requester gets that error as the
// reply. A stage that leaves a replica group because a replica died is the one
// exception: the join fails with the group's error and the stage lives on
// (JoinReplicaGroup), since the coordinator's next recovery joins again.
#include <caf/all.hpp>

#include "actors/messages/recovery_messages.hpp"
#include "actors/messages/replica_recovery_messages.hpp"
#include "actors/messages/stage_snapshot.hpp"
#include "actors/plan/protocol.hpp"

namespace conveyor {

struct PeerTable;       // messages.hpp: it holds StageActor handles
struct ChannelFailure;  // messages.hpp

/// To a stage: its state as the coordinator gathers it at the end of the run.
using weights_atom = caf::atom_constant<caf::atom("weights")>;

/// The pipeline step: peers, plans and the activations and gradients between stages, the
/// optimizer step, and the failures of the transfers that carry them.
using StageStepApi = caf::typed_actor<
    caf::reacts_to<PeerTable>,       // every stage's handle by rank (before the first plan)
    caf::reacts_to<StepPlan>,        // the actions of one round
    caf::reacts_to<PipeMessage>,     // an activation or gradient, in this process
    caf::reacts_to<PipeHeader>,      // one from another process (its tensor on a channel)
    caf::reacts_to<ChannelFailure>,  // a transfer of this stage failed
    caf::replies_to<OptimizerStep>::with<OptimizerDone>>;

/// Recovery: drop a round, restore a snapshot (its own, node 0's copy, a healthy
/// replica's), join the replica groups of the next generation.
using StageRecoveryApi = caf::typed_actor<
    caf::replies_to<AbortRound>::with<RoundAborted>,
    caf::replies_to<RestoreStage>::with<StageRestored>,
    caf::replies_to<RestoreFromCopy>::with<StageRestored>,
    caf::reacts_to<CopyArrived>,  // the stage to itself: a RestoreFromCopy's bytes arrived
    caf::replies_to<RestoreFromReplica>::with<StageRestored>,
    caf::replies_to<JoinReplicaGroup>::with<ReplicaGroupJoined>>;

/// Snapshots, checkpoints and the final weights.
using StageCheckpointApi = caf::typed_actor<
    caf::replies_to<TakeSnapshot>::with<SnapshotTaken>,
    caf::replies_to<CopySnapshot>::with<SnapshotTaken>,
    caf::replies_to<WriteShard>::with<bool>,
    caf::replies_to<snapshot_atom>::with<StageSnapshot>,
    caf::replies_to<weights_atom>::with<WeightsReply>>;

/// A stage actor's handle.
using StageActor = StageStepApi::extend_with<StageRecoveryApi, StageCheckpointApi>;

}  // namespace conveyor
