#pragma once
// Setting up an NCCL edge between two processes through the rendezvous store: the
// sender makes the communicator's unique id and publishes it under
// "nccl/<edge name>/<generation>"; the receiver waits for that key. Both then join the
// communicator; everything is bounded by edge.timeout.
// REQUIRES: edge names are unique in the job (two edges must not share a key).
#include <memory>
#include <string>

#include "transport/nccl/nccl_channel.hpp"
#include "transport/rendezvous/client.hpp"

namespace conveyor {

/// The store key of an edge's unique id.
std::string nccl_id_key(const NcclEdge& edge);

std::unique_ptr<NcclSendChannel> connect_nccl_sender(RendezvousClient& store, const NcclEdge& edge);
/// Throws RendezvousError when the sender published no id within edge.timeout, NcclError
/// when the value is not an id.
std::unique_ptr<NcclRecvChannel> connect_nccl_receiver(RendezvousClient& store,
                                                       const NcclEdge& edge);

}  // namespace conveyor
