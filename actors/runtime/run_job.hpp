#pragma once
// The composition root: this process's part of a training job, whether the job runs in
// this process alone or spans processes (one per node, the launch's --nnodes).
//
// Every node: an actor system, its own stage actors, and the services of the job made
// from its plan (job_setup.hpp). Node 0 also runs the coordinator, which drives every
// stage, local or remote, through ordinary caf::actor handles, and collects the final
// weights. A job of one process is the one-node case: no rendezvous store, no CAF
// middleman, no channels to other processes; its stages may run detached.
//
// Across processes the nodes talk through the rendezvous store (keys; every wait bounded
// by rendezvous_timeout):
//   ucx/<node>    the node's UCX worker address       → every node connects to every node
//   epoch         node 0's steady clock at start (ns)  → with the store's clock offset,
//                 every node times its actions against the same epoch (bubble, traces)
//   caf/<node>    "HOST:PORT" of the node's directory  → node k connects to nodes < k
// then node k announces its stages to node 0's directory (NodeStages), node 0 spawns the
// coordinator once every rank is known, and trains.
// Ending: the coordinator ends every stage; node k returns once its stages are down (it
// sends the final weights to node 0 first). If node 0 goes away before that, node k ends
// its stages and throws.
// Liveness: every node heartbeats through the store (LivenessWatch); a node that goes
// silent fails the job on node 0 ("stage 2 failed: node 1 stopped responding"), and the
// store going silent tells the other nodes that node 0 is gone.
// Recovery (fault.policy restart, CPU stages): every node keeps its stages' in-memory
// snapshots, and node 0 a copy of every other node's (snapshot_keeper.hpp). A stage of
// node 0 that fails is respawned in place; a lost node k > 0 is waited for
// (rejoin_timeout): its replacement, started again with the same node rank, finds the
// job running (the store's "running" key), dials every node, announces its stages to
// node 0's directory, and the coordinator restores and replays (coordinator_rejoin.cpp).
#include <optional>

#include "actors/cluster/node_setup.hpp"
#include "actors/job/job_services.hpp"
#include "transport/rendezvous/client.hpp"

namespace conveyor {

/// Runs this process's part of `job` (its services: what the app hands in; the root adds
/// the rest). `store`: the job's rendezvous store, joined as rank setup.node of
/// setup.nnodes; null for a job of this process alone (setup is then ignored). Node 0
/// returns the result with the whole model's weights; other nodes std::nullopt. Progress
/// goes to `observer` (node 0, from the coordinator's thread). Throws HangError when the
/// watchdog stopped the run, std::runtime_error naming the stage, node or key that failed.
std::optional<TrainResult> run_job(const Job& job, const NodeSetup& setup, RendezvousClient* store,
                                   TrainingObserver* observer);

/// A job of this process alone: run_job without a store.
inline TrainResult run_training(const Job& job, TrainingObserver& observer) {
  return *run_job(job, NodeSetup{}, nullptr, &observer);
}

}  // namespace conveyor
