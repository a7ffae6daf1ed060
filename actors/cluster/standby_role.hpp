#pragma once
// Issue 44 item 7, the part that needs no store mirror: a node that stands by for node 0
// (the lowest other node of the layout it runs now: actors/plan/leader_election.hpp)
// keeps copies of node 0's stages' snapshots, as node 0 keeps every other node's, so that
// node 0's stages outlive node 0. Its keeper is the same actor as node 0's
// (snapshot_keeper.hpp), over this node's SnapshotStore; this node names it in its
// NodeStages, through which node 0's coordinator learns it and tells node 0's stages
// (PeerTable::standby_keeper).
//
// What must hold: after every layout (the first, each Relayout) the node knows afresh
// whether it stands by, since the standby is derived from the layout (a lost node 1 is
// replaced by the next lowest node, and stands by again when it grows back). A keeper,
// once spawned, lives as long as the node: a node that stops standing by only no longer
// names it (its store is reset by the move anyway).
// Thread-safety: every member locks (the layout changes on the directory's thread, the
// summary is read on the node's main thread).
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/cluster/copies_in_flight.hpp"
#include "actors/fault/snapshot_store.hpp"
#include "actors/messages/keeper_interface.hpp"

namespace conveyor {

class StandbyRole {
 public:
  /// Spawns this node's keeper, counting the copies it receives in the given counter.
  using SpawnKeeper = std::function<KeeperActor(std::shared_ptr<CopiesInFlight>)>;

  StandbyRole(int node, int leader, SpawnKeeper spawn);

  /// The layout over `nodes` (idle ones included) whose actors run on `node_of_rank`:
  /// the keeper to name in this node's NodeStages (spawned the first time this node
  /// stands by), or null when it does not stand by in this layout.
  KeeperActor on_layout(const std::vector<int>& nodes, const std::vector<int>& node_of_rank);

  /// The line this node says as the run ends (empty when it does not stand by): which of
  /// the leader's stages it holds copies of, up to which step, once the copies still
  /// arriving came (waiting at most `wait`), and their bytes a snapshot.
  std::string summary(const SnapshotStore& store, std::chrono::milliseconds wait);
  /// What the summary says this node holds ("copies of stage(s) [0] up to step 24 (1.45 MB
  /// a snapshot)"), waiting as it does; empty when it does not stand by.
  std::string holdings(const SnapshotStore& store, std::chrono::milliseconds wait);

 private:
  const int node_;
  const int leader_;
  const SpawnKeeper spawn_;
  const std::shared_ptr<CopiesInFlight> in_flight_ = std::make_shared<CopiesInFlight>();
  std::mutex mutex_;
  KeeperActor keeper_;             // spawned the first time this node stands by
  bool stands_by_ = false;         // in the layout it runs now
  std::vector<int> leader_ranks_;  // the leader's ranks in that layout
};

}  // namespace conveyor
