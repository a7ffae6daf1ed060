#include "actors/plan/replica_placement.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace conveyor {

MicroBatchShare micro_batch_share(int micro_batches, int replicas, int replica) {
  if (replicas < 1 || micro_batches % replicas != 0 || replica < 0 || replica >= replicas)
    throw std::invalid_argument("micro_batch_share: replica " + std::to_string(replica) + " of " +
                                std::to_string(replicas) + " for " +
                                std::to_string(micro_batches) + " micro-batches");
  const int count = micro_batches / replicas;
  return MicroBatchShare{replica * count, count};
}

ConfiguredShares configured_shares(int configured, int running, int replica) {
  if (running < 1 || running > configured || replica < 0 || replica >= running)
    throw std::invalid_argument("configured_shares: replica " + std::to_string(replica) + " of " +
                                std::to_string(running) + " standing for " + std::to_string(configured) +
                                " configured replicas");
  const int base = configured / running;
  const int extra = configured % running;  // the first `extra` take one more
  return ConfiguredShares{replica * base + std::min(replica, extra), base + (replica < extra ? 1 : 0)};
}

MicroBatchShare shares_micro_batches(int micro_batches, int configured, int running, int replica) {
  const ConfiguredShares shares = configured_shares(configured, running, replica);
  const int per_share = micro_batch_share(micro_batches, configured, 0).count;
  return MicroBatchShare{shares.first * per_share, shares.count * per_share};
}

RankPlacement replica_rank_placement(const Placement& pipeline, const ReplicaLayout& layout,
                                     int actor) {
  if (actor < 0 || actor >= layout.actors() ||
      static_cast<int>(pipeline.ranks.size()) != layout.stages)
    throw std::out_of_range("replica_rank_placement: actor " + std::to_string(actor) + " of " +
                            std::to_string(layout.replicas) + " replicas × " +
                            std::to_string(layout.stages) + " stages");
  RankPlacement rank = pipeline.ranks.at(static_cast<std::size_t>(layout.stage_of(actor)));
  rank.rank = actor;
  rank.replica = layout.replica_of(actor);
  return rank;
}

}  // namespace conveyor
