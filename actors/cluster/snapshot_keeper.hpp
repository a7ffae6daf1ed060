#pragma once
// A node's copy of other nodes' in-memory snapshots, so that a process that dies takes no
// state with it (issue: "a second copy on a buddy process on another host").
// Node 0's keeper takes every other node's copies: node 0 hosts the rendezvous store and
// the coordinator, and the coordinator then finds every rank's snapshots (its own
// stages' and the copies) in node 0's SnapshotStore, from which it picks the step to
// restore. The standby's keeper (the lowest other node of the layout, issue 44 item 7:
// actors/plan/leader_election.hpp) takes node 0's stages' copies the same way, so that
// node 0's stages outlive node 0: `keep` takes a rank of any node but its own.
//
//   stage of node k>0 ─SnapshotCopy (CAF: names, shapes)─▶ keeper (node 0)
//                     ─bytes (channel, snapshot_tag)────▶ keeper → SnapshotStore.put
//   stage of node 0   ─SnapshotCopy, bytes─────────────▶ keeper (the standby)
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
#include "actors/cluster/copies_in_flight.hpp"
#include "actors/messages/keeper_interface.hpp"
#include "actors/stage/current_links.hpp"
#include "actors/fault/snapshot_store.hpp"

namespace conveyor {

struct SnapshotKeeperState {
  std::shared_ptr<SnapshotStore> store;   // this node's: its own stages' snapshots and the copies
  std::shared_ptr<const CurrentLinks> links;  // the layout's now (a re-plan replaces them)
  std::shared_ptr<checkpoint::RemoteShards> shards;  // null: node 0 writes every shard
  std::shared_ptr<CopiesInFlight> in_flight;  // null: not counted
  std::uint32_t restores = 0;  // restores handed out: each one's series (edge_tags.hpp)
  static inline const char* name = "snapshot-keeper";
};

KeeperActor::behavior_type snapshot_keeper(KeeperActor::stateful_pointer<SnapshotKeeperState> self,
                                           std::shared_ptr<SnapshotStore> store,
                                           std::shared_ptr<const CurrentLinks> links,
                                           std::shared_ptr<checkpoint::RemoteShards> shards,
                                           std::shared_ptr<CopiesInFlight> in_flight = nullptr);

}  // namespace conveyor
