#include "kernels/optim/optimizer_shard.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace conveyor {

ElementRange replica_shard(std::int64_t total, int rank, int ranks) {
  if (ranks < 1 || rank < 0 || rank >= ranks || total < 0)
    throw std::invalid_argument("replica_shard: rank " + std::to_string(rank) + " of " +
                                std::to_string(ranks) + " over " + std::to_string(total) +
                                " elements");
  const std::int64_t base = total / ranks, extra = total % ranks;
  const std::int64_t begin = rank * base + std::min<std::int64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

std::vector<std::int64_t> replica_shard_sizes(std::int64_t total, int ranks) {
  std::vector<std::int64_t> sizes;
  for (int r = 0; r < ranks; ++r) sizes.push_back(replica_shard(total, r, ranks).size());
  return sizes;
}

ElementRange local_overlap(const ElementRange& shard, std::int64_t offset, std::int64_t count) {
  const std::int64_t begin = std::clamp(shard.begin - offset, std::int64_t{0}, count);
  const std::int64_t end = std::clamp(shard.end - offset, begin, count);
  return {begin, end};
}

}  // namespace conveyor
