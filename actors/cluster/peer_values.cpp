#include "actors/cluster/peer_values.hpp"

#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <stdexcept>

#include "transport/rendezvous/error.hpp"

namespace conveyor {
namespace {

// The whole of `text` as a decimal integer in [lo, hi], or false.
bool parse_integer(const std::string& text, std::int64_t lo, std::int64_t hi, std::int64_t& out) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc{} && ptr == end && out >= lo && out <= hi;
}

std::string shown(const std::string& text) {
  return text.size() <= 80 ? text : text.substr(0, 80) + "...";
}

}  // namespace

std::int64_t parse_peer_epoch(const std::string& text) {
  std::int64_t ns = 0;
  if (!parse_integer(text, 0, INT64_MAX, ns))
    throw std::runtime_error(fmt::format(
        "rendezvous key 'epoch' (node 0's clock) holds '{}', not a count of nanoseconds "
        "(another program or version on this rendezvous?)",
        shown(text)));
  return ns;
}

namespace {

// HOST:PORT as parse_peer_endpoint reads it; `what` names the key and what it holds.
PeerEndpoint parse_endpoint(const std::string& text, const std::string& what) {
  const auto bad = [&](const char* why) {
    return std::runtime_error(fmt::format("rendezvous key {} holds '{}': {}", what, shown(text), why));
  };
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) throw bad("not HOST:PORT");
  std::int64_t port = 0;
  if (!parse_integer(text.substr(colon + 1), 1, 65535, port)) throw bad("the port is not a number in 1..65535");
  std::string host = text.substr(0, colon);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') throw bad("an unclosed '[' around the host");
    host = host.substr(1, host.size() - 2);
  }
  return {host, static_cast<std::uint16_t>(port)};
}

}  // namespace

PeerEndpoint parse_peer_endpoint(const std::string& text, int node) {
  return parse_endpoint(text, fmt::format("'caf/{}' (node {}'s actors)", node, node));
}

std::string standby_text(const StandbyAddress& standby) {
  return fmt::format("{} {} {}", standby.generation, standby.node,
                     rendezvous::host_port(standby.store.host, standby.store.port));
}

StandbyAddress parse_standby(const std::string& text) {
  const auto what = fmt::format("'{}' (the standby's copy of the store)", kStandbyKey);
  const auto first = text.find(' ');
  const auto second = first == std::string::npos ? first : text.find(' ', first + 1);
  std::int64_t generation = 0, node = 0;
  if (second == std::string::npos || !parse_integer(text.substr(0, first), 0, INT64_MAX, generation) ||
      !parse_integer(text.substr(first + 1, second - first - 1), 1, 1 << 20, node))
    throw std::runtime_error(fmt::format(
        "rendezvous key {} holds '{}', not 'GENERATION NODE HOST:PORT' (another program or version on "
        "this rendezvous?)",
        what, shown(text)));
  return {generation, static_cast<int>(node), parse_endpoint(text.substr(second + 1), what)};
}

std::string layout_nodes_text(const std::vector<int>& nodes) { return fmt::format("{}", fmt::join(nodes, ",")); }

std::vector<int> parse_layout_nodes(const std::string& text) {
  std::vector<int> nodes;
  std::size_t at = 0;
  while (at <= text.size()) {
    const auto comma = std::min(text.find(',', at), text.size());
    std::int64_t node = 0;
    // Ascending and distinct, as node 0 writes them: anything else is not ours.
    if (!parse_integer(text.substr(at, comma - at), 0, 1 << 20, node) || (!nodes.empty() && node <= nodes.back()))
      throw std::runtime_error(fmt::format(
          "rendezvous key '{}' (the nodes of the running layout) holds '{}', not ascending node ranks "
          "separated by commas (another program or version on this rendezvous?)",
          kLayoutNodesKey, shown(text)));
    nodes.push_back(static_cast<int>(node));
    at = comma + 1;
  }
  return nodes;
}

bool joiner_dials(const std::optional<std::vector<int>>& layout_nodes, int node) {
  return node == 0 || !layout_nodes || std::ranges::find(*layout_nodes, node) != layout_nodes->end();
}

}  // namespace conveyor
