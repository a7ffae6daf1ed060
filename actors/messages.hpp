#pragma once
// The pipeline protocol (actors/protocol.hpp) as CAF messages. Inside one process they
// travel as handles (copy-on-write messages, no serialisation); the ones that cross
// processes serialize as wire_format.hpp describes and are registered by add_wire_types().
// PipeMessage holds a tensor and stays local (CAF_ALLOW_UNSAFE_MESSAGE_TYPE): across
// processes a PipeHeader goes over CAF and the tensor over the edge's channel.
#include <caf/all.hpp>
#include <string>
#include <vector>

#include "actors/protocol.hpp"
#include "actors/wire_format.hpp"

namespace conveyor {

/// Handles of every stage actor by rank; sent once before the first plan.
struct PeerTable {
  std::vector<caf::actor> ranks;
};

template <class Inspector, class T>
wire::both_t<Inspector, T, PeerTable> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("PeerTable"), x.ranks);
}

/// A node's stage actors, announced to node 0 before the coordinator starts.
struct NodeStages {
  int node = 0;
  std::vector<int> ranks;
  std::vector<caf::actor> actors;  // actors[i] runs rank ranks[i]
};

template <class Inspector, class T>
wire::both_t<Inspector, T, NodeStages> inspect(Inspector& f, T& x) {
  return f(caf::meta::type_name("NodeStages"), x.node, x.ranks, x.actors);
}

/// A channel operation of a stage failed (timeout, broken connection, wrong length);
/// local to the stage's process: the stage fails with this text.
struct ChannelFailure {
  std::string what;
};

using weights_atom = caf::atom_constant<caf::atom("weights")>;
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
  cfg.add_message_type<PeerTable>("conveyor::PeerTable");
  cfg.add_message_type<NodeStages>("conveyor::NodeStages");
}

}  // namespace conveyor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::PipeMessage)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(conveyor::ChannelFailure)
