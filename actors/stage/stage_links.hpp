#pragma once
// How the stage actors of one process reach stages in other processes: which process
// (node) runs each rank, and the channel that carries tensors to and from each peer node.
// A message to a rank of another node goes as a PipeHeader over CAF, its tensor over the
// channel; a message inside the process stays a PipeMessage (a handle, no copy). Built
// once per process before the stages start; read-only afterwards (shared by its stages).
#include <chrono>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "transport/remote_channel.hpp"

namespace conveyor {

struct StageLinks {
  int node = 0;                   // this process
  std::vector<int> node_of_rank;  // by stage actor: every replica's ranks, replica-major
  // By peer node. With transport.kind ucx in one process, the node's own entry is a
  // loopback channel and every edge takes it (through_channels).
  std::map<int, std::shared_ptr<RemoteChannel>> channels;
  bool through_channels = false;  // route in-process edges over the channels too
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};  // transport.timeout_s

  /// True when messages to `rank` go over a channel (another node, or forced).
  bool crosses(int rank) const { return through_channels || node_of_rank.at(rank) != node; }

  /// The channel to `peer_node`; throws std::logic_error when none was built.
  RemoteChannel& channel_to(int peer_node) const {
    auto it = channels.find(peer_node);
    if (it == channels.end() || !it->second)
      throw std::logic_error("node " + std::to_string(node) + " has no channel to node " +
                             std::to_string(peer_node));
    return *it->second;
  }
};

}  // namespace conveyor
