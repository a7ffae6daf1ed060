#include "transport/nccl/nccl_rendezvous.hpp"

#include <cstring>
#include <span>

namespace conveyor {

std::string nccl_id_key(const NcclEdge& edge) {
  return "nccl/" + edge.name + "/" + std::to_string(edge.generation);
}

std::unique_ptr<NcclSendChannel> connect_nccl_sender(RendezvousClient& store, const NcclEdge& edge) {
  const ncclUniqueId id = NcclCommunicator::new_id();
  store.set(nccl_id_key(edge),
            std::span(reinterpret_cast<const std::uint8_t*>(&id), sizeof id));
  return std::make_unique<NcclSendChannel>(id, edge);
}

std::unique_ptr<NcclRecvChannel> connect_nccl_receiver(RendezvousClient& store,
                                                       const NcclEdge& edge) {
  const auto value = store.wait(nccl_id_key(edge), edge.timeout);
  ncclUniqueId id;
  if (value.size() != sizeof id)
    throw NcclError("nccl: edge '" + edge.name + "': the store holds " +
                    std::to_string(value.size()) + " bytes under " + nccl_id_key(edge) +
                    ", not a " + std::to_string(sizeof id) + "-byte unique id");
  std::memcpy(&id, value.data(), sizeof id);
  return std::make_unique<NcclRecvChannel>(id, edge);
}

}  // namespace conveyor
