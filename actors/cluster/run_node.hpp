#pragma once
// One process's part of a job that spans processes (one per node, DESIGN.md "Launch").
// Every node: an actor system with CAF's middleman, a UCX hub for tensors, its own stage
// actors (linked_stage_actor), and a node directory published through the middleman.
// Node 0 also runs the coordinator, which drives every stage, local or remote, through
// ordinary caf::actor handles, and collects the final weights.
//
// Conversation through the rendezvous store (keys; every wait bounded by
// rendezvous_timeout):
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
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "actors/runtime/training_job.hpp"
#include "transport/rendezvous/client.hpp"

namespace conveyor {

struct NodeSetup {
  int nnodes = 1;
  int node = 0;
  std::vector<int> node_of_rank;  // by stage actor: every replica's ranks, replica-major
  /// This node's address as the other nodes reach it (the directory is published there).
  std::string advertise_host = "127.0.0.1";
  std::chrono::milliseconds rendezvous_timeout{std::chrono::seconds(60)};
  std::chrono::milliseconds transport_timeout{std::chrono::seconds(60)};
  /// transport.kind ucx: edges inside this process go over UCX too (a loopback channel).
  bool through_channels = false;
  /// UCX_TLS for the worker; empty: the UCX_TLS environment variable or UCX's choice.
  std::string ucx_transports;
  /// This host's steady clock against node 0's (node 0 time = local + offset), measured
  /// once at the rendezvous: the shared epoch and the trace file both use it. 0 on node 0.
  std::chrono::nanoseconds steady_clock_offset{0};
  /// The store as the liveness watch reaches it (a connection of its own; short connect
  /// and io timeouts: an unreachable store is how node 0's death shows).
  RendezvousClientOptions store;
  /// Every node heartbeats this often; a node silent for peer_silence
  /// (rendezvous.peer_silence_s, at least 4 heartbeats) is lost, and the job fails naming
  /// its stages instead of waiting out transport.timeout_s.
  std::chrono::milliseconds heartbeat_interval{250};
  std::chrono::milliseconds peer_silence{std::chrono::seconds(5)};
  /// How long the job waits for a lost node's replacement (fault.rejoin_timeout_s); 0:
  /// a lost node ends the job.
  std::chrono::milliseconds rejoin_timeout{0};
  /// This process replaces a lost one of a running job (ClusterSession saw "running").
  bool rejoining = false;
  /// Stops (SIGTERM, a first Ctrl-C) reach the coordinator on node 0 wherever they were
  /// caught: node k > 0 polls `local_stop` (the signal this process caught, 0 none) every
  /// stop_poll and forwards the first to node 0's directory, which hands it to
  /// `peer_stop`. Either may be null (no stops across processes).
  std::function<int()> local_stop;
  std::function<void(int node, int signal)> peer_stop;
  std::chrono::milliseconds stop_poll{100};
  /// Node k > 0: called (on the liveness watch's thread) when node 0 declared this node
  /// lost while it did not run or answer (the store's lost mark changed). It may not
  /// return (the process starts again as its own replacement); if it does, or is null,
  /// the node ends its part of the job, saying why.
  std::function<void(const std::string& why)> on_declared_lost;
};

/// The store key node 0 sets once every node's stages are known: a node that joins
/// later is a replacement.
inline constexpr const char* kJobRunningKey = "running";

/// REQUIRES: `store` joined as rank setup.node of setup.nnodes. Node 0 returns the result
/// with the whole model's weights; other nodes return std::nullopt. Throws
/// std::runtime_error naming the stage, node or key that failed.
std::optional<TrainResult> run_node(const TrainingJob& job, const NodeSetup& setup,
                                    RendezvousClient& store, TrainingObserver* observer);

}  // namespace conveyor
