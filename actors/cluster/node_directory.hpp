#pragma once
// The one actor each process publishes through CAF's middleman. Other processes connect
// to it (remote_actor), which gives every pair of nodes one direct CAF connection:
// node k connects to the directories of nodes 0 .. k-1, so handles of stage actors in any
// process resolve to a direct route when the coordinator's PeerTable reaches them.
// Node 0's directory also gathers the stage actors of every node (NodeStages) and hands
// them, ordered by rank, to the coordinator's builder (stages_atom), so remote stage
// actors reach the coordinator as ordinary StageActor handles; with them the standby's
// snapshot keeper, named by the one node that stands by for node 0 (LayoutActors; issue 44
// item 7), at start, after every Relayout and when the standby's replacement rejoins.
//
// A lost process's replacement (same node rank, fault.rejoin_timeout_s) announces its
// stages again, once every rank is known: node 0's directory then connects this
// process's channels to the replacement's UCX worker, has every other node's directory
// do the same (PeerRejoined), and only then hands the new stages to the coordinator
// (NodeStages; coordinator_rejoin.cpp) and answers the replacement. A replacement must
// run exactly the ranks its node ran before.
// A failed stage of a node whose process lives on is respawned by that node's directory
// (RespawnStage, which node 0's directory forwards to the node that runs the rank).
// A re-plan over the nodes present (issue 44: Relayout) reaches every one of them the same
// way: each spawns its actors of the new layout; node 0's directory gathers them by rank,
// forgets the nodes not present, and answers the coordinator with every actor.
// A move is void when a node is lost during it (the coordinator says so:
// relayout_void_atom): the actors spawned for it, node 0's and those the other nodes
// answered with, before or after, are ended, so none outlives a move that did not
// happen. A node the directory forwarded a Relayout to that is unreachable is reported to
// the coordinator as lost (node_lost_atom) before the failed answer, so that it abandons
// the move rather than failing the run.
// A node that announces its stages after such a re-plan, and is not in its layout (the
// lost node restarted, or a new process with its node rank: issue 44's grow), joins: its
// channels are connected here and on every other node as a replacement's are, then the
// coordinator hears of it (node_joined_atom) and takes it in at a boundary fault.grow
// allows; with fault.grow never (`no_grow`) it is refused, naming the key. Two nodes that
// join before either is taken in cannot count on reaching each other by themselves (each
// dials only the layout's nodes, and the other's address in the store may still be its
// dead forerunner's), so the later one is also connected to every earlier joiner still
// waiting (PeerRejoined to its own directory), as the earlier ones are to it.
// A node a re-plan kept in the job without a stage (its ranks empty here) and lost since is
// forgotten when the coordinator says so (forget_node_atom): no later move or joiner is
// sent to it, and the layout's nodes in the store, which a joining process dials, are
// published again without it.
// Node 0's directory copies the other nodes' progress reports (ProgressReport) into the
// board of the job's hang watchdog; a report naming ranks its node does not run is
// dropped with one warning per node.
#include <caf/all.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "actors/messages/coordinator_interface.hpp"
#include "actors/messages/messages.hpp"

namespace conveyor {

using stages_atom = caf::atom_constant<caf::atom("stages")>;
/// To node 0's directory: the coordinator that takes the stages of rejoined nodes.
using coordinator_atom = caf::atom_constant<caf::atom("coord")>;

/// Connects this process's channels to node `node`'s new UCX worker; throws on failure.
using Reconnect = std::function<void(int node, const std::vector<std::uint8_t>& ucx_address)>;
/// Spawns a replacement for this node's stage `rank`, fenced at `round_fence`.
using RespawnLocal = std::function<StageActor(int rank, std::int64_t round_fence)>;
/// Issue 44's re-plan: spawns this node's stage actors of the layout `r` names (its ranks
/// and actors; the directory fills in itself); throws naming what failed.
using RelayoutLocal = std::function<NodeStages(const Relayout& r)>;
/// Rebuilds this node's NCCL edges with communicators of `generation`; blocks until done.
using RebuildEdges = std::function<void(std::uint32_t generation)>;
/// From a survivor of node 0's loss (leader_failover.hpp): whether this directory still
/// answers over the CAF connection the survivor dialed at start; the reply is its node.
using reach_atom = caf::atom_constant<caf::atom("reach")>;
/// To node 0's directory, from node k: a stop signal node k caught (SIGTERM, SIGINT).
using stop_request_atom = caf::atom_constant<caf::atom("stopreq")>;
/// Node 0: takes a stop that node `node` forwarded (node_directory checks the node).
using PeerStop = std::function<void(int node, int signal)>;
/// Node 0: records the nodes of the layout the job runs now, for processes that join.
using PublishLayoutNodes = std::function<void(const std::vector<int>& nodes)>;

/// The move (Relayout) node 0's directory is gathering the new actors of (node_directory.cpp).
struct RelayoutGather;

struct NodeDirectoryState {
  int ranks = 0;                      // pipeline ranks of the whole job
  std::vector<StageActor> by_rank;    // filled as nodes announce their stages
  int known = 0;                      // entries of by_rank filled
  std::vector<caf::response_promise> waiting;  // stages_atom requests before all known
  std::map<int, std::vector<int>> ranks_of_node;  // as first announced
  std::map<int, caf::actor> directories;          // every node's, by node
  struct Standby {
    int node = -1;
    KeeperActor keeper;
  } standby;                          // node 0: the layout's standby, from its NodeStages
  Reconnect reconnect;               // null: replacements are refused
  RespawnLocal respawn;              // null: this node's stages are not respawned
  RebuildEdges rebuild;              // null: this node has no NCCL edges
  RelayoutLocal relayout;            // null: this node takes no re-plan (Relayout fails)
  bool relaid = false;               // a Relayout moved the job off its first layout
  std::shared_ptr<RelayoutGather> moving;  // node 0: the Relayout being gathered; null: none
  std::string no_grow;               // why a node that joins a shrunk job is refused; empty: taken
  PublishLayoutNodes publish_layout; // node 0 across processes; null: nothing to tell
  // Node 0: the UCX workers of the nodes that joined a shrunk job, kept while they are not
  // in the layout (a later joiner is connected to each: node_directory.cpp, rejoin).
  std::map<int, std::vector<std::uint8_t>> joiner_ucx;
  PeerStop peer_stop;                // null: forwarded stops are ignored (node k > 0)
  std::shared_ptr<trace::ProgressBoard> watched;  // node 0 with a watchdog; null: reports ignored
  std::set<int> refused_reports;     // nodes whose bad progress report was logged
  int node = 0;                      // this directory's
  CoordinatorActor coordinator;      // node 0, once it runs
  static inline const char* name = "node-directory";
};

/// `local` are this node's stages. `reconnect` null: a lost node cannot rejoin; `respawn`
/// null: a failed stage of this node is not replaced; `watched` null: progress reports are
/// ignored; `relayout` null: the job cannot move this node onto another layout; `no_grow`
/// not empty: a node that joins after a re-plan is refused with it; `publish_layout` null:
/// a node forgotten (forget_node_atom) is not unpublished.
caf::behavior node_directory(caf::stateful_actor<NodeDirectoryState>* self, int ranks,
                             NodeStages local, Reconnect reconnect, RespawnLocal respawn,
                             RebuildEdges rebuild, PeerStop peer_stop = {},
                             std::shared_ptr<trace::ProgressBoard> watched = {},
                             RelayoutLocal relayout = {}, std::string no_grow = {},
                             PublishLayoutNodes publish_layout = {});

}  // namespace conveyor
