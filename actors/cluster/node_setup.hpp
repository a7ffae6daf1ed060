#pragma once
// How one process takes part in a job over several processes: its node rank, where the
// other nodes reach it, the rendezvous and liveness timings, and the hooks for stops and
// for being declared lost (actors/runtime/run_job.hpp runs it).
#include <chrono>
#include <functional>
#include <string>
#include <vector>

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

}  // namespace conveyor
