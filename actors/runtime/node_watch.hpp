#pragma once
// Node k > 0 of a job over several processes, while node 0's coordinator drives the job:
// its main thread watches this node's stages until they are down, forwards a stop it
// caught to node 0, and says why the node failed when it did.
#include <caf/all.hpp>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <vector>

#include "actors/cluster/loss_relay.hpp"
#include "actors/cluster/node_directory.hpp"

namespace conveyor {

/// To node k's main thread: its directory respawned stage `rank` as this actor.
using stage_replaced_atom = caf::atom_constant<caf::atom("replaced")>;
/// To node k's main thread: a re-plan (issue 44) gave this node this actor of the new
/// layout's `rank`; the old layout's actors end in order (the coordinator ends them).
using stage_relaid_atom = caf::atom_constant<caf::atom("relaid")>;
/// To node k's main thread: a re-plan left this node without a stage (a shrink onto one
/// replica seats fewer nodes than are present). It stays in the job until node 0 ends, so
/// that a process joining later can still reach it (and a grow could seat it again).
using stage_idle_atom = caf::atom_constant<caf::atom("idle")>;

/// Thrown by watch_stages, with fault.leader_failover, when node 0 (the leader) was lost
/// while the job ran: what() says how it was seen. The caller runs the election
/// (actors/cluster/leader_failover.hpp).
struct LeaderLost : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Waits until the stages `mine` are down (the coordinator ends them). Throws naming a
/// local stage that failed (and was not replaced), or a node that was lost (`relay`: the
/// liveness watch). `respawns`: a failed stage may come back (node 0 has this node
/// respawn it). A stop this node caught is forwarded once to node 0 (`forward_stop`,
/// polled every `poll`); once node 0 is gone, `grace` bounds the wait. `leader_failover`:
/// node 0 lost while the stages still ran (the grace waited out, or a local stage failed
/// meanwhile) throws LeaderLost instead of naming the stages.
void watch_stages(caf::scoped_actor& self, const NodeStages& mine, const std::vector<int>& node_of_rank,
                  const caf::actor& node0, const LossRelay& relay, std::chrono::milliseconds grace,
                  bool respawns, const std::function<bool()>& forward_stop,
                  std::chrono::milliseconds poll, std::chrono::milliseconds peer_silence,
                  bool leader_failover = false);

}  // namespace conveyor
