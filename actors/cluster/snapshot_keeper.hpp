#pragma once
// Node 0's copy of every other node's in-memory snapshots, so that a process that dies
// takes no state with it (issue: "a second copy on a buddy process on another host").
// Node 0 is every node's buddy: it hosts the rendezvous store and the coordinator, so a
// job survives only processes other than node 0 anyway, and the coordinator then finds
// every rank's snapshots (its own stages' and the copies) in node 0's SnapshotStore, from
// which it picks the step to restore.
//
//   stage of node k>0 ─SnapshotCopy (CAF: names, shapes)─▶ keeper (node 0)
//                     ─bytes (channel, snapshot_tag)────▶ keeper → SnapshotStore.put
//   coordinator ─RestoreRejoined{r, stage, S}─▶ keeper ─RestoreFromCopy + bytes─▶ stage r
//                                                (delegated: the stage answers the
//                                                 coordinator with StageRestored)
// A copy enters the store only once all its bytes arrived (a copy that fails is logged
// and dropped: the store keeps the older ones).
// With checkpoint.writers every_node it also takes the other nodes' reports of the shards
// they wrote themselves (ShardWritten) into node 0's book (remote_shards.hpp): here, not at
// the coordinator, whose thread may be the one waiting for them (a stop's checkpoint).
#include <caf/all.hpp>
#include <chrono>
#include <memory>

#include "actors/checkpoint/remote_shards.hpp"
#include "actors/messages/keeper_interface.hpp"
#include "actors/stage/current_links.hpp"
#include "actors/fault/snapshot_store.hpp"

namespace conveyor {

struct SnapshotKeeperState {
  std::shared_ptr<SnapshotStore> store;   // node 0's: its own stages' snapshots and the copies
  std::shared_ptr<const CurrentLinks> links;  // the layout's now (a re-plan replaces them)
  std::shared_ptr<checkpoint::RemoteShards> shards;  // null: node 0 writes every shard
  std::uint32_t restores = 0;  // restores handed out: each one's series (edge_tags.hpp)
  static inline const char* name = "snapshot-keeper";
};

KeeperActor::behavior_type snapshot_keeper(KeeperActor::stateful_pointer<SnapshotKeeperState> self,
                                           std::shared_ptr<SnapshotStore> store,
                                           std::shared_ptr<const CurrentLinks> links,
                                           std::shared_ptr<checkpoint::RemoteShards> shards);

}  // namespace conveyor
