#include "actors/checkpoint/sharded_state.hpp"

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "kernels/model/state_names.hpp"

namespace conveyor::checkpoint {
namespace {

bool is_moment(const std::string& name) {
  return name.starts_with(kOptMPrefix) || name.starts_with(kOptVPrefix);
}

std::vector<NamedTensor> tensors_of(StageShard& shard) {
  if (shard.produce) return shard.produce();
  return std::move(shard.tensors);
}

// Replica 0's tensors with every other replica's moment bits OR-ed in (see the header).
std::vector<NamedTensor> merge(std::vector<StageShard>& replicas) {
  std::vector<NamedTensor> out = tensors_of(replicas.front());
  for (NamedTensor& t : out)
    if (is_moment(t.name)) t.tensor = t.tensor.clone();  // written below: own the bytes
  for (std::size_t r = 1; r < replicas.size(); ++r) {
    const std::vector<NamedTensor> other = tensors_of(replicas[r]);
    if (other.size() != out.size())
      throw std::runtime_error("merging sharded optimizer state of stage " +
                               std::to_string(replicas.front().stage) + ": replica " +
                               std::to_string(r) + " holds " + std::to_string(other.size()) +
                               " tensors, replica 0 " + std::to_string(out.size()));
    for (std::size_t i = 0; i < out.size(); ++i) {
      NamedTensor& mine = out[i];
      if (!is_moment(mine.name)) continue;
      const Tensor& theirs = other[i].tensor;
      if (other[i].name != mine.name || theirs.shape() != mine.tensor.shape() ||
          theirs.dtype() != mine.tensor.dtype() || mine.tensor.dtype() != DType::f32)
        throw std::runtime_error("merging sharded optimizer state: replica " + std::to_string(r) +
                                 " holds " + other[i].name + " " + theirs.describe() +
                                 " where replica 0 holds " + mine.name + " " +
                                 mine.tensor.describe());
      auto* bits = static_cast<std::uint32_t*>(mine.tensor.raw());
      const auto* add = static_cast<const std::uint32_t*>(theirs.raw());
      for (std::int64_t k = 0; k < mine.tensor.numel(); ++k) bits[k] |= add[k];
    }
  }
  return out;
}

}  // namespace

std::vector<StageShard> merge_sharded_replicas(std::vector<StageShard> by_actor, int replicas) {
  if (replicas < 1 || by_actor.size() % static_cast<std::size_t>(replicas) != 0)
    throw std::invalid_argument("merge_sharded_replicas: " + std::to_string(by_actor.size()) +
                                " stage captures for " + std::to_string(replicas) + " replicas");
  const std::size_t stages = by_actor.size() / static_cast<std::size_t>(replicas);
  std::vector<StageShard> out(stages);
  for (std::size_t p = 0; p < stages; ++p) {
    auto parts = std::make_shared<std::vector<StageShard>>();
    for (int r = 0; r < replicas; ++r)
      parts->push_back(std::move(by_actor[static_cast<std::size_t>(r) * stages + p]));
    out[p].stage = static_cast<int>(p);
    out[p].produce = [parts] { return merge(*parts); };
  }
  return out;
}

}  // namespace conveyor::checkpoint
