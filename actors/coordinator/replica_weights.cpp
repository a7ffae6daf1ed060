#include "actors/coordinator/replica_weights.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace conveyor {

std::vector<std::vector<NamedTensor>> weights_by_replica(const std::vector<WeightsReply>& replies,
                                                         const ReplicaLayout& layout) {
  std::vector<std::vector<const ModelStageWeights*>> stages(
      static_cast<std::size_t>(layout.replicas));
  for (const auto& reply : replies) {
    if (reply.rank < 0 || reply.rank >= layout.actors())
      throw std::logic_error(fmt::format("weights of stage actor {} in a run of {} actors",
                                         reply.rank, layout.actors()));
    for (const auto& m : reply.model_stages)
      stages[static_cast<std::size_t>(layout.replica_of(reply.rank))].push_back(&m);
  }
  std::vector<std::vector<NamedTensor>> out;
  for (auto& replica : stages) {
    std::sort(replica.begin(), replica.end(),
              [](auto* a, auto* b) { return a->model_stage < b->model_stage; });
    std::vector<NamedTensor> model;
    for (const auto* m : replica) model.insert(model.end(), m->tensors.begin(), m->tensors.end());
    out.push_back(std::move(model));
  }
  return out;
}

std::optional<std::string> replica_difference(const std::vector<std::vector<NamedTensor>>& replicas) {
  if (replicas.empty()) return std::nullopt;
  const auto& first = replicas.front();
  for (std::size_t r = 1; r < replicas.size(); ++r) {
    const auto& other = replicas[r];
    if (other.size() != first.size())
      return fmt::format("replica {} holds {} tensors, replica 0 {}", r, other.size(), first.size());
    for (std::size_t i = 0; i < first.size(); ++i) {
      const Tensor& a = first[i].tensor;
      const Tensor& b = other[i].tensor;
      if (other[i].name != first[i].name || a.shape() != b.shape() || a.dtype() != b.dtype() ||
          std::memcmp(a.raw(), b.raw(), a.bytes()) != 0)
        return fmt::format("replica {} differs from replica 0 in {}", r, first[i].name);
    }
  }
  return std::nullopt;
}

}  // namespace conveyor
