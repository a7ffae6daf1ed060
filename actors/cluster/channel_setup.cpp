#include "actors/cluster/channel_setup.hpp"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <stdexcept>
#include <vector>

#include "actors/cluster/peer_values.hpp"
#include "actors/messages/edge_tags.hpp"
#include "transport/ucx/ucx_channel.hpp"
#include "transport/ucx/ucx_error.hpp"

#if CONVEYOR_WITH_CUDA
#include "transport/nccl/nccl_remote_channel.hpp"
#include "transport/nccl/nccl_rendezvous.hpp"
#endif

namespace conveyor {
namespace {

std::string node_name(int node) { return fmt::format("node {}", node); }

// One direction of a pipeline edge that crosses nodes between two CUDA stages.
struct GpuEdge {
  TagKind kind;               // activation (from → to = model stage + 1) or gradient
  int boundary;               // the tag's edge field: the lower model stage
  int from_rank, to_rank;     // sending and receiving pipeline ranks
  std::string name;           // "act 1->2", "grad 2->1"
};

// Every such edge of the job, in the order every process joins them.
std::vector<GpuEdge> gpu_edges(const Job& job, const NodeSetup& setup) {
  std::vector<GpuEdge> edges;
  const Placement& p = job.plan.placement;
  for (int ms = 0; ms + 1 < p.model_stages(); ++ms) {
    const int a = p.chunk_of(ms).rank, b = p.chunk_of(ms + 1).rank;
    if (setup.node_of_rank.at(a) == setup.node_of_rank.at(b)) continue;
    if (p.ranks.at(a).device.is_cpu() || p.ranks.at(b).device.is_cpu()) continue;
    edges.push_back({TagKind::activation, ms, a, b, fmt::format("act {}->{}", ms, ms + 1)});
    edges.push_back({TagKind::gradient, ms, b, a, fmt::format("grad {}->{}", ms + 1, ms)});
  }
  return edges;
}

}  // namespace

std::shared_ptr<StageLinks> connect_channels(const Job& job, const NodeSetup& setup,
                                             RendezvousClient& store, std::shared_ptr<UcxHub> hub) {
  auto links = std::make_shared<StageLinks>();
  links->node = setup.node;
  links->node_of_rank = setup.node_of_rank;
  links->through_channels = setup.through_channels;
  links->timeout = setup.transport_timeout;

  // 1. UCX to every node (host tensors; the final weights also from GPU stages). A process
  // joining a job that shrank must reach the layout's nodes; any other node was lost for
  // good (its address is stale: "Destination is unreachable") or joined and waits to be
  // taken in with this one (it must be reached then), so it is tried, not required. Every
  // channel exists all the same; a node reached later connects through PeerRejoined.
  const auto present = setup.rejoining ? running_layout_nodes(store) : std::nullopt;
  store.set(fmt::format("ucx/{}", setup.node), ucx_address(*hub));
  for (int j = 0; j < setup.nnodes; ++j) {
    if (j == setup.node && !setup.through_channels) continue;
    links->channels[j] = std::make_shared<UcxChannel>(hub, j, node_name(j));
    if (j != setup.node && !joiner_dials(present, j)) {
      try {
        if (const auto address = store.get(fmt::format("ucx/{}", j))) connect_ucx_peer(*hub, j, *address);
      } catch (const UcxError&) {
      }
      continue;
    }
    const auto address = store.wait(fmt::format("ucx/{}", j), setup.rendezvous_timeout);
    connect_ucx_peer(*hub, j, address);
  }

  // 2. NCCL for the edges between CUDA stages of different nodes, in the global order.
  const std::vector<GpuEdge> edges = gpu_edges(job, setup);
  if (edges.empty()) return links;
#if CONVEYOR_WITH_CUDA
  std::map<int, std::shared_ptr<NcclRemoteChannel>> nccl;  // by peer node
  auto channel_to = [&](int peer) -> NcclRemoteChannel& {
    auto& c = nccl[peer];
    if (!c) c = std::make_shared<NcclRemoteChannel>(links->channels.at(peer), node_name(peer));
    return *c;
  };
  for (const GpuEdge& e : edges) {
    const int from_node = setup.node_of_rank.at(e.from_rank);
    const int to_node = setup.node_of_rank.at(e.to_rank);
    if (from_node != setup.node && to_node != setup.node) continue;
    const bool sending = from_node == setup.node;
    NcclEdge edge{.name = e.name,
                  .device = job.plan.placement.ranks.at(sending ? e.from_rank : e.to_rank).device.index,
                  .timeout = setup.transport_timeout,
                  .generation = 0};
    if (sending)
      channel_to(to_node).add_sender(e.kind, e.boundary, connect_nccl_sender(store, edge));
    else
      channel_to(from_node).add_receiver(e.kind, e.boundary, connect_nccl_receiver(store, edge));
  }
  for (auto& [peer, channel] : nccl) links->channels[peer] = channel;
  return links;
#else
  throw std::runtime_error(fmt::format(
      "edge {} joins CUDA stages of different nodes, but this build has no NCCL", edges.front().name));
#endif
}

std::optional<std::vector<int>> running_layout_nodes(RendezvousClient& store) {
  const auto bytes = store.get(kLayoutNodesKey);
  if (!bytes) return std::nullopt;
  return parse_layout_nodes(std::string(bytes->begin(), bytes->end()));
}

void publish_layout_nodes(RendezvousClient& store, const std::vector<int>& nodes) {
  store.set(kLayoutNodesKey, layout_nodes_text(nodes));
}

rendezvous::Bytes ucx_address(const UcxHub& hub) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(hub.address().data());
  return {p, p + hub.address().size()};
}

void connect_ucx_peer(UcxHub& hub, int node, const rendezvous::Bytes& address) {
  const auto* p = reinterpret_cast<const std::byte*>(address.data());
  hub.connect(node, {p, p + address.size()}, node_name(node));
}

bool has_nccl_edges(const Job& job, const NodeSetup& setup) {
  return !gpu_edges(job, setup).empty();
}

void rebuild_nccl_edges(const Job& job, const NodeSetup& setup, RendezvousClient& store,
                        const StageLinks& links, std::uint32_t generation) {
#if CONVEYOR_WITH_CUDA
  // First every old communicator of this node goes (its stuck kernels end), then the
  // new ones are joined one edge after the other in the global order.
  for (const auto& [peer, channel] : links.channels)
    if (auto* nccl = dynamic_cast<NcclRemoteChannel*>(channel.get())) nccl->abort_edges();
  for (const GpuEdge& e : gpu_edges(job, setup)) {
    const int from_node = setup.node_of_rank.at(e.from_rank);
    const int to_node = setup.node_of_rank.at(e.to_rank);
    if (from_node != setup.node && to_node != setup.node) continue;
    const bool sending = from_node == setup.node;
    auto* channel = dynamic_cast<NcclRemoteChannel*>(&links.channel_to(sending ? to_node : from_node));
    if (!channel) throw std::logic_error("edge " + e.name + " has no NCCL channel to rebuild");
    NcclEdge edge{.name = e.name,
                  .device = job.plan.placement.ranks.at(sending ? e.from_rank : e.to_rank).device.index,
                  .timeout = setup.transport_timeout,
                  .generation = generation};
    if (sending)
      channel->replace_sender(e.kind, e.boundary, connect_nccl_sender(store, edge));
    else
      channel->replace_receiver(e.kind, e.boundary, connect_nccl_receiver(store, edge));
  }
#else
  (void)job, (void)setup, (void)store, (void)links, (void)generation;
#endif
}

}  // namespace conveyor
