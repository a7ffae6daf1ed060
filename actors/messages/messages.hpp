#pragma once
// The pipeline protocol (actors/plan/protocol.hpp) as CAF messages. Inside one process they
// travel as handles (copy-on-write messages, no serialisation); the ones that cross
// processes serialize as wire_format.hpp describes and are registered by add_wire_types().
// PipeMessage holds a tensor and stays local (CAF_ALLOW_UNSAFE_MESSAGE_TYPE): across
// processes a PipeHeader goes over CAF and the tensor over the edge's channel.
#include <caf/all.hpp>
#include <string>
#include <vector>

#include "actors/messages/recovery_messages.hpp"
#include "actors/messages/replica_recovery_messages.hpp"
#include "actors/messages/keeper_interface.hpp"
#include "actors/messages/stage_interface.hpp"
#include "actors/plan/protocol.hpp"
#include "actors/trace/remote_progress.hpp"
#include "actors/messages/wire_format.hpp"

namespace conveyor::trace {

template <class Inspector, class T>
wire::both_t<Inspector, T, RemoteStageProgress> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("RemoteStageProgress"), x.rank, x.state, x.round, x.step, x.eval,
           x.slot, x.age_ns, x.first_micro_batch);
}

}  // namespace conveyor::trace

namespace conveyor {

/// Handles of every stage actor by rank; sent before the first plan and after every
/// recovery that replaced one. It also routes the buddy copies of snapshots (a message
/// re-targets the stages it reaches, where their links are fixed at spawn): a stage of a
/// node other than `keeper_node` sends its copies to `keeper`; a stage of `keeper_node`
/// (the leader) sends its own to `standby_keeper`, so that the leader's stages outlive
/// the leader (issue 44 item 7; actors/plan/leader_election.hpp).
struct PeerTable {
  std::vector<StageActor> ranks;
  /// The leader's snapshot keeper (actors/cluster/snapshot_keeper.hpp) when the stages of
  /// other nodes send it copies of their snapshots; null otherwise.
  KeeperActor keeper;
  /// The node that runs `keeper` (and the coordinator): it takes the other nodes' copies,
  /// final weights and shard reports.
  int keeper_node = 0;
  /// The standby's keeper (the lowest other node of the layout), which keeps copies of
  /// `keeper_node`'s stages' snapshots; null: none (one node, or no buddy copies).
  KeeperActor standby_keeper;
  int standby_node = -1;
};

template <class Inspector, class T>
wire::both_t<Inspector, T, PeerTable> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("PeerTable"), x.ranks, x.keeper, x.keeper_node, x.standby_keeper,
           x.standby_node);
}

/// A node's stage actors, announced to node 0 before the coordinator starts.
struct NodeStages {
  int node = 0;
  std::vector<int> ranks;
  std::vector<StageActor> actors;  // actors[i] runs rank ranks[i]
  caf::actor directory;            // the node's own directory (node_directory.hpp)
  std::vector<std::uint8_t> ucx_address;  // its UCX worker's, for peers that reconnect
  KeeperActor keeper;  // the node's snapshot keeper when it stands by for node 0; null otherwise
};

template <class Inspector, class T>
wire::both_t<Inspector, T, NodeStages> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("NodeStages"), x.node, x.ranks, x.actors, x.directory,
           x.ucx_address, x.keeper);
}

/// Node 0's directory's answer to the stages of a layout (at start, and after a Relayout):
/// every stage actor by rank, and the standby's keeper, from the node whose NodeStages
/// named one (null keeper and node -1: no node stands by). Inside node 0 only.
struct LayoutActors {
  std::vector<StageActor> stages;
  KeeperActor standby_keeper;
  int standby_node = -1;
};

/// From node 0's directory to the other nodes' when a lost node's replacement joined:
/// connect this process's channels to its new UCX worker (node_directory.hpp).
struct PeerRejoined {
  int node = 0;
  std::vector<std::uint8_t> ucx_address;
};

template <class Inspector, class T>
wire::both_t<Inspector, T, PeerRejoined> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("PeerRejoined"), x.node, x.ucx_address);
}

/// From node k > 0 to node 0's directory a few times a second while the job trains:
/// what each of node k's stages is doing, for node 0's hang watchdog
/// (actors/trace/remote_progress.hpp).
struct ProgressReport {
  int node = 0;
  std::vector<trace::RemoteStageProgress> stages;
};

template <class Inspector, class T>
wire::both_t<Inspector, T, ProgressReport> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("ProgressReport"), x.node, x.stages);
}

/// A channel operation of a stage failed (timeout, broken connection, wrong length);
/// local to the stage's process: the stage fails with this text, unless the operation
/// belonged to a round a recovery has aborted since.
struct ChannelFailure {
  std::string what;
  std::int64_t round = 0;
};

using train_atom = caf::atom_constant<caf::atom("train")>;
/// To the coordinator, from the hang watchdog or from the liveness watch when a node is
/// lost: fail the run with this reason.
using stop_run_atom = caf::atom_constant<caf::atom("stoprun")>;

/// Registers every message that crosses processes (CAF 0.17 needs a name per type on
/// both sides). Call on the config of every actor system that loads the middleman.
inline void add_wire_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<sched::Action>("conveyor::Action");
  cfg.add_message_type<StepPlan>("conveyor::StepPlan");
  cfg.add_message_type<PipeHeader>("conveyor::PipeHeader");
  cfg.add_message_type<StageReport>("conveyor::StageReport");
  cfg.add_message_type<OptimizerStep>("conveyor::OptimizerStep");
  cfg.add_message_type<OptimizerDone>("conveyor::OptimizerDone");
  cfg.add_message_type<WeightsReply>("conveyor::WeightsReply");
  cfg.add_message_type<StageActor>("conveyor::StageActor");
  cfg.add_message_type<std::vector<StageActor>>("conveyor::StageActors");
  cfg.add_message_type<PeerTable>("conveyor::PeerTable");
  cfg.add_message_type<NodeStages>("conveyor::NodeStages");
  cfg.add_message_type<PeerRejoined>("conveyor::PeerRejoined");
  cfg.add_message_type<TakeSnapshot>("conveyor::TakeSnapshot");
  cfg.add_message_type<SnapshotTaken>("conveyor::SnapshotTaken");
  cfg.add_message_type<RestoreStage>("conveyor::RestoreStage");
  cfg.add_message_type<StageRestored>("conveyor::StageRestored");
  cfg.add_message_type<SnapshotCopy>("conveyor::SnapshotCopy");
  cfg.add_message_type<CopySnapshot>("conveyor::CopySnapshot");
  cfg.add_message_type<WriteShard>("conveyor::WriteShard");
  cfg.add_message_type<ShardWritten>("conveyor::ShardWritten");
  cfg.add_message_type<RespawnStage>("conveyor::RespawnStage");
  cfg.add_message_type<trace::RemoteStageProgress>("conveyor::RemoteStageProgress");
  cfg.add_message_type<ProgressReport>("conveyor::ProgressReport");
  cfg.add_message_type<RebuildChannels>("conveyor::RebuildChannels");
  cfg.add_message_type<Relayout>("conveyor::Relayout");
  cfg.add_message_type<RestoreFromCopy>("conveyor::RestoreFromCopy");
  cfg.add_message_type<AbortRound>("conveyor::AbortRound");
  cfg.add_message_type<RoundAborted>("conveyor::RoundAborted");
  cfg.add_message_type<JoinReplicaGroup>("conveyor::JoinReplicaGroup");
  cfg.add_message_type<ReplicaGroupJoined>("conveyor::ReplicaGroupJoined");
  cfg.add_message_type<ReplicaGroupFailed>("conveyor::ReplicaGroupFailed");
}

}  // namespace conveyor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::PipeMessage)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::ChannelFailure)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::LayoutActors)
