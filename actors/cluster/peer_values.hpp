#pragma once
// Values other nodes publish in the rendezvous store as text (node 0's clock epoch, each
// node's CAF endpoint), parsed strictly: a peer of another version, or a store written by
// something else, gives an error naming the key and the node, never an exception of the
// standard library's number parsing or a port that wraps around.
#include <cstdint>
#include <string>

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

}  // namespace conveyor
