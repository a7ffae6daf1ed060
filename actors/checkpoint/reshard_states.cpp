#include "actors/checkpoint/reshard_states.hpp"

#include <map>

#include "actors/checkpoint/checkpoint_error.hpp"

namespace conveyor::checkpoint {

std::vector<std::vector<NamedTensor>> reshard_states(const std::vector<std::vector<NamedTensor>>& old_stages,
                                                     const std::vector<std::vector<TensorSpec>>& new_stages,
                                                     const std::string& where) {
  // A checkpoint's shards never hold a name twice (its index refuses it); the old stages'
  // states must not either: which copy would win is not a choice to make silently.
  std::map<std::string, Tensor> pooled;
  std::map<std::string, std::size_t> holder;
  for (std::size_t k = 0; k < old_stages.size(); ++k)
    for (const auto& t : old_stages[k]) {
      if (auto [it, fresh] = holder.emplace(t.name, k); !fresh)
        throw CheckpointError(where, "tensor " + t.name + " is held by old stages " + std::to_string(it->second) +
                                         " and " + std::to_string(k));
      pooled.emplace(t.name, t.tensor);
    }
  return reshard(pooled, new_stages, where);
}

}  // namespace conveyor::checkpoint
