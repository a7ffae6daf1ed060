#include "actors/cluster/remote_weights.hpp"

#include <fmt/format.h>

#include <future>
#include <memory>
#include <stdexcept>

#include "actors/messages/edge_tags.hpp"
#include "actors/messages/pending_payload.hpp"

namespace conveyor {

void fetch_remote_weights(std::vector<NamedTensor>& weights, const StageLinks& links,
                          std::chrono::milliseconds timeout) {
  struct Pending {
    std::size_t index;
    int node;
    std::future<Tensor> tensor;
  };
  std::vector<Pending> pending;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    const PendingPayload* p = pending_payload(weights[i].tensor);
    if (!p) continue;
    // The tag names the stage actor that sent it (weight_tag, edge_tags.hpp).
    const int node = links.node_of_rank.at(static_cast<std::size_t>(unpack_tag(p->tag()).edge));
    auto promise = std::make_shared<std::promise<Tensor>>();
    pending.push_back(Pending{i, node, promise->get_future()});
    links.channel_to(node).receive(p->tag(), weights[i].tensor.shape(), weights[i].tensor.dtype(),
                                   timeout, [promise](Tensor t, std::exception_ptr e) {
                                     if (e)
                                       promise->set_exception(e);
                                     else
                                       promise->set_value(std::move(t));
                                   });
  }
  // The channel completes every receive by its deadline; the margin covers its polling.
  const auto deadline = std::chrono::steady_clock::now() + timeout + std::chrono::seconds(5);
  for (auto& p : pending) {
    const auto& name = weights[p.index].name;
    if (p.tensor.wait_until(deadline) != std::future_status::ready)
      throw std::runtime_error(fmt::format("final weights: {} from node {} did not arrive", name,
                                           p.node));
    try {
      weights[p.index].tensor = p.tensor.get();
    } catch (const std::exception& e) {
      throw std::runtime_error(fmt::format("final weights: {} from node {}: {}", name, p.node,
                                           e.what()));
    }
  }
}

}  // namespace conveyor
