#pragma once
// Messages of a recovery with data-parallel replicas (parallel.data > 1, one process;
// coordinator_recovery.cpp), beside recovery_messages.hpp:
//   C → S_r   AbortRound{fence}          drop the plan and every message of a round <= fence,
//                                        leave the stage group (its buckets settled first),
//                                        drop the gradients; keep the weights
//   S_r → C   RoundAborted
//   C → S_h   snapshot_atom              a healthy replica's state (stage_snapshot.hpp)
//   C → S_r   RestoreFromReplica         a respawned stage loads that state
//   S_r → C   StageRestored
//   C → S_r   JoinReplicaGroup{g}        every stage, once every stage is restored: join
//                                        its stage group's generation g (blocks until the
//                                        R ranks joined; a group is never reused)
//   S_r → C   ReplicaGroupJoined
//   S_r → C   ReplicaGroupFailed         a bucket of the stage's group failed (a replica
//                                        died or left): the stage dropped its round and
//                                        waits for the coordinator's recovery
// (RestoreStage, for the snapshot path, also leaves the group before it loads.)
// In-process only: replicas run in one process so far.
#include <caf/all.hpp>
#include <cstdint>
#include <string>

#include "actors/stage/stage_snapshot.hpp"

namespace conveyor {

struct AbortRound {
  std::int64_t round_fence = 0;  // rounds up to this one are void; the next plan is fence + 1
};

struct RoundAborted {
  int rank = 0;
};

/// `state`: a healthy replica's StageSnapshot (StageWorker::capture_state and its AdamW
/// step count), the state after `steps_done` steps.
struct RestoreFromReplica {
  std::int64_t steps_done = 0;
  StageSnapshot state;
};

struct JoinReplicaGroup {
  std::uint32_t generation = 0;
};

struct ReplicaGroupJoined {
  int rank = 0;
};

struct ReplicaGroupFailed {
  int rank = 0;
  std::int64_t round = 0;  // the round the stage dropped
  std::string what;
};

}  // namespace conveyor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::AbortRound)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::RoundAborted)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::RestoreFromReplica)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::JoinReplicaGroup)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::ReplicaGroupJoined)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::ReplicaGroupFailed)
