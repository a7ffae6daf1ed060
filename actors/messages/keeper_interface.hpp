#pragma once
// The interface of a snapshot keeper (actors/cluster/snapshot_keeper.hpp: node 0's, and the
// standby's, which keeps node 0's stages' copies) as a CAF typed actor: the copies and
// shard reports the other nodes' stages send it, and the restores of a lost node's ranks
// the coordinator asks of it (answered by the stage it hands the copy to, with the same
// reply a stage's own restore gives).
#include <caf/all.hpp>
#include <string>

#include "actors/messages/recovery_messages.hpp"
#include "actors/messages/stage_interface.hpp"

namespace conveyor {

/// To node 0's snapshot keeper (inside node 0): have `stage`, which runs rank `rank`,
/// restore node 0's copy of its state per `restore`; `stage` answers the requester.
struct RestoreRejoined {
  int rank = 0;
  StageActor stage;
  RestoreStage restore;
};

/// To node 0's snapshot keeper (inside node 0), without buddy copies, when a lost node's
/// replacement joined: have `stage`, which runs rank `rank`, restore the shard of
/// pipeline stage `shard` (a checkpoint holds replica 0's: rank modulo the pipeline's
/// stages) of the verified checkpoint in `path` (the step folder of `restore.steps_done`
/// steps); `stage` answers the requester.
struct RestoreFromCheckpoint {
  int rank = 0;
  StageActor stage;
  RestoreStage restore;
  std::string path;
  int shard = 0;
};

using KeeperActor = caf::typed_actor<
    caf::reacts_to<SnapshotCopy>,                  // a stage of another node, after a snapshot
    caf::replies_to<ShardWritten>::with<bool>,     // node k's write queue; false: not expected
    caf::replies_to<RestoreRejoined>::with<StageRestored>,
    caf::replies_to<RestoreFromCheckpoint>::with<StageRestored>>;

}  // namespace conveyor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::RestoreRejoined)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::RestoreFromCheckpoint)
