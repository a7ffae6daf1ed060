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
// All but RestoreFromReplica cross processes (wire types, messages.hpp): replicas over
// several processes recover through the snapshot path, never by copying a replica's
// in-memory state from another process.
#include <caf/all.hpp>
#include <cstdint>
#include <string>

#include "actors/messages/stage_snapshot.hpp"
#include "actors/messages/wire_format.hpp"

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

template <class Inspector, class T>
wire::both_t<Inspector, T, AbortRound> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("AbortRound"), x.round_fence);
}

template <class Inspector, class T>
wire::both_t<Inspector, T, RoundAborted> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("RoundAborted"), x.rank);
}

template <class Inspector, class T>
wire::both_t<Inspector, T, JoinReplicaGroup> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("JoinReplicaGroup"), x.generation);
}

template <class Inspector, class T>
wire::both_t<Inspector, T, ReplicaGroupJoined> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("ReplicaGroupJoined"), x.rank);
}

template <class Inspector, class T>
wire::both_t<Inspector, T, ReplicaGroupFailed> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("ReplicaGroupFailed"), x.rank, x.round, x.what);
}

}  // namespace conveyor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::RestoreFromReplica)
