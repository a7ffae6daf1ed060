#pragma once
// Values other nodes publish in the rendezvous store as text (node 0's clock epoch, each
// node's CAF endpoint), parsed strictly: a peer of another version, or a store written by
// something else, gives an error naming the key and the node, never an exception of the
// standard library's number parsing or a port that wraps around.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace conveyor {

/// "epoch": node 0's steady clock in nanoseconds, a decimal integer. THROWS
/// std::runtime_error naming the key.
std::int64_t parse_peer_epoch(const std::string& text);

struct PeerEndpoint {
  std::string host;  // without the brackets of an IPv6 address
  std::uint16_t port = 0;
};

/// "caf/<node>": HOST:PORT with PORT in 1..65535; HOST may be an IPv6 address, bracketed
/// or not ("::1:4000", "[::1]:4000"). THROWS std::runtime_error naming the key.
PeerEndpoint parse_peer_endpoint(const std::string& text, int node);

/// "standby": where the standby of the layout (actors/plan/leader_election.hpp) serves its
/// copy of the store (actors/cluster/leader_failover.hpp), as it writes it when it starts
/// standing by: "GENERATION NODE HOST:PORT", GENERATION the layout's (0 the started one).
inline constexpr const char* kStandbyKey = "standby";
struct StandbyAddress {
  std::int64_t generation = 0;
  int node = -1;
  PeerEndpoint store;
};
std::string standby_text(const StandbyAddress& standby);
/// THROWS std::runtime_error naming the key.
StandbyAddress parse_standby(const std::string& text);

/// "layout/nodes": the nodes that run a stage actor in the layout the job runs now, as
/// node 0 writes it at every re-layout (issue 44's shrink and grow): "0,1" ascending. A
/// process joining a running job dials only these (and node 0): a node lost for good
/// left its addresses in the store, and dialing them fails ("Destination is unreachable");
/// its UCX worker is tried all the same (channel_setup.cpp: a node waiting to be taken in).
/// Absent while the job runs the layout it started with (every node).
inline constexpr const char* kLayoutNodesKey = "layout/nodes";
std::string layout_nodes_text(const std::vector<int>& nodes);
/// THROWS std::runtime_error naming the key.
std::vector<int> parse_layout_nodes(const std::string& text);

/// Whether a process joining a running job connects to `node`, given the key's value
/// (nullopt: absent). Node 0 always: it hosts the store and the coordinator.
bool joiner_dials(const std::optional<std::vector<int>>& layout_nodes, int node);

}  // namespace conveyor
