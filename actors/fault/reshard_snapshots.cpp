#include "actors/fault/reshard_snapshots.hpp"

#include <fmt/format.h>

#include <memory>

#include "actors/checkpoint/checkpoint_error.hpp"
#include "actors/checkpoint/reshard_states.hpp"
#include "kernels/model/param_layout.hpp"

namespace conveyor {

std::vector<StageStateSnapshot> reshard_snapshots(const SnapshotStore& store, std::int64_t steps_done,
                                                  const JobPlan& from, const JobPlan& to) {
  if (from.shards_optimizer_state() || to.shards_optimizer_state())
    throw std::invalid_argument("resharding in-memory snapshots of ZeRO-1 sharded optimizer state "
                                "(optim.shard_state) is not supported");
  // The old model stages' states, one copy of each pipeline stage (replica 0).
  std::vector<std::vector<NamedTensor>> old_stages;
  std::int64_t optimizer_steps = -1;
  for (int rank = 0; rank < static_cast<int>(from.placement.ranks.size()); ++rank) {
    const auto held = store.get(rank, steps_done);
    if (!held || held->marker || held->chunks.empty())
      throw ReshardSnapshotsError(fmt::format("stage {} holds no snapshot of step {} here{}", rank, steps_done,
                                              held && held->marker ? " (only in its own process)" : ""));
    if (optimizer_steps < 0) optimizer_steps = held->optimizer_steps();
    old_stages.push_back(held->tensors());
  }
  return cut_states_for(old_stages, steps_done, optimizer_steps, to, fmt::format("the snapshots of step {}", steps_done));
}

std::vector<StageStateSnapshot> cut_states_for(const std::vector<std::vector<NamedTensor>>& old_stages,
                                               std::int64_t steps_done, std::int64_t optimizer_steps,
                                               const JobPlan& to, const std::string& where) {
  // 1. The new model stages' specs, by (rank, chunk) of one replica of `to`.
  std::vector<std::vector<checkpoint::TensorSpec>> specs;
  std::vector<std::pair<int, int>> rank_chunk;  // of each entry of specs
  for (const auto& rank : to.placement.ranks)
    for (const auto& c : rank.chunks) {
      specs.push_back(checkpoint::specs_of(stage_param_layout(to.model, c.slice)));
      rank_chunk.emplace_back(rank.rank, c.chunk);
    }
  std::vector<std::vector<NamedTensor>> cut;
  try {
    cut = checkpoint::reshard_states(old_stages, specs, where);
  } catch (const checkpoint::CheckpointError& e) {
    throw ReshardSnapshotsError(e.what());
  }
  // 2. Per new pipeline rank its chunks in chunk order, then one per actor of every replica.
  const int ranks = static_cast<int>(to.placement.ranks.size());
  std::vector<StageStateSnapshot> per_rank(static_cast<std::size_t>(ranks));
  for (auto& s : per_rank) s.steps_done = steps_done;
  for (int r = 0; r < ranks; ++r)
    per_rank[static_cast<std::size_t>(r)].chunks.resize(to.placement.ranks[static_cast<std::size_t>(r)].chunks.size());
  for (std::size_t k = 0; k < cut.size(); ++k) {
    const auto [rank, chunk] = rank_chunk[k];
    per_rank.at(static_cast<std::size_t>(rank)).chunks.at(static_cast<std::size_t>(chunk)) =
        std::make_shared<TensorStateSnapshot>(std::move(cut[k]), optimizer_steps);
  }
  std::vector<StageStateSnapshot> out;
  for (int a = 0; a < to.stage_actors(); ++a) out.push_back(per_rank.at(static_cast<std::size_t>(a % ranks)));
  return out;
}

}  // namespace conveyor
