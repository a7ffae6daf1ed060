#pragma once
// The channels that carry tensors between this process and the other nodes of a job: one
// RemoteChannel per peer node, chosen by what the pipeline edges between the two carry.
//
//   edges between host-memory stages        ucx    (transport/ucx/ucx_channel.hpp)
//   edges between CUDA stages               nccl   for their activations and gradients,
//                                                  one communicator per directed edge;
//                                                  ucx for the rest (final weights)
//                                                  (transport/nccl/nccl_remote_channel.hpp)
//
// Rendezvous keys (every wait bounded by rendezvous_timeout, NCCL setup by the transport
// timeout):
//   ucx/<node>                   the node's UCX worker address; every node connects to all
//                                (a process joining a shrunk job: those of layout/nodes)
//   layout/nodes                 the nodes of the layout the job runs now, written by
//                                node 0 at every re-layout (peer_values.hpp)
//   nccl/<edge name>/0           an NCCL edge's unique id, made by its sending node:
//                                "act 1->2" (activations of model stage 1 to 2),
//                                "grad 2->1" (their gradients)
// Order: the NCCL edges are joined in one order every process follows (by model-stage
// boundary, activations before gradients), so that two processes never wait for each
// other's second edge (nccl_channel.hpp).
#include <memory>
#include <optional>
#include <vector>

#include "actors/cluster/node_setup.hpp"
#include "actors/job/job_services.hpp"
#include "actors/stage/stage_links.hpp"
#include "transport/rendezvous/client.hpp"
#include "transport/ucx/ucx_hub.hpp"

namespace conveyor {

/// REQUIRES: `store` joined as setup.node; `hub` is this process's UCX hub. Throws
/// UcxError / NcclError / RendezvousError naming the peer or the edge that failed.
std::shared_ptr<StageLinks> connect_channels(const Job& job, const NodeSetup& setup,
                                             RendezvousClient& store, std::shared_ptr<UcxHub> hub);

/// layout/nodes (peer_values.hpp): nullopt while the job runs the layout it started with.
/// Throws RendezvousError, or std::runtime_error for a value that is not node 0's.
std::optional<std::vector<int>> running_layout_nodes(RendezvousClient& store);
/// Node 0, at every re-layout: the nodes that run a stage actor now.
void publish_layout_nodes(RendezvousClient& store, const std::vector<int>& nodes);

/// This hub's worker address as the store and NodeStages carry it.
rendezvous::Bytes ucx_address(const UcxHub& hub);
/// Connects `hub` to node `node`'s worker at `address` (a fresh endpoint replaces an old
/// one: a replacement process rejoined). Throws UcxError.
void connect_ucx_peer(UcxHub& hub, int node, const rendezvous::Bytes& address);

/// True when some edge of the job is an NCCL edge (GPU stages of different nodes).
bool has_nccl_edges(const Job& job, const NodeSetup& setup);

/// A recovery: every NCCL edge of this node gets a new communicator of `generation`
/// (keys nccl/<edge name>/<generation>), in the order every process follows; the old ones
/// are aborted and what was queued on them fails with ChannelReset. Every node must call
/// it with the same generation at about the same time (each edge's two ends meet).
/// Throws NcclError / RendezvousError naming the edge.
void rebuild_nccl_edges(const Job& job, const NodeSetup& setup, RendezvousClient& store,
                        const StageLinks& links, std::uint32_t generation);

}  // namespace conveyor
