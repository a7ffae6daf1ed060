#include "actors/fault/snapshot_store.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace conveyor {

std::vector<NamedTensor> StageStateSnapshot::tensors() const {
  std::vector<NamedTensor> out;
  for (const auto& c : chunks) {
    auto t = c->tensors();
    out.insert(out.end(), std::make_move_iterator(t.begin()), std::make_move_iterator(t.end()));
  }
  return out;
}

std::size_t StageStateSnapshot::bytes() const {
  std::size_t n = 0;
  for (const auto& c : chunks) n += c->bytes();
  return n;
}

SnapshotStore::SnapshotStore(int ranks, int keep)
    : ranks_(ranks), keep_(static_cast<std::size_t>(std::max(keep, 2))),
      by_rank_(static_cast<std::size_t>(std::max(ranks, 0))) {
  if (ranks <= 0) throw std::invalid_argument("SnapshotStore: needs at least one stage");
}

int SnapshotStore::ranks() const {
  std::lock_guard lock(mutex_);
  return ranks_;
}

void SnapshotStore::put(int rank, StageStateSnapshot snapshot) {
  auto shared = std::make_shared<const StageStateSnapshot>(std::move(snapshot));
  std::lock_guard lock(mutex_);
  if (rank < 0 || rank >= ranks_)
    throw std::out_of_range("SnapshotStore: rank " + std::to_string(rank) + " of " +
                            std::to_string(ranks_));
  auto& mine = by_rank_[static_cast<std::size_t>(rank)];
  mine[shared->steps_done] = std::move(shared);
  while (mine.size() > keep_) mine.erase(mine.begin());
}

std::optional<std::int64_t> SnapshotStore::consistent_step() const {
  std::vector<int> every(static_cast<std::size_t>(ranks()));
  for (std::size_t r = 0; r < every.size(); ++r) every[r] = static_cast<int>(r);
  return consistent_step(every);
}

std::optional<std::int64_t> SnapshotStore::consistent_step(const std::vector<int>& ranks) const {
  std::lock_guard lock(mutex_);
  if (ranks.empty() || std::any_of(ranks.begin(), ranks.end(), [&](int r) { return r < 0 || r >= ranks_; }))
    return std::nullopt;
  // Candidates: the first rank's steps, newest first; the first that every rank holds.
  const auto& first = by_rank_[static_cast<std::size_t>(ranks.front())];
  for (auto it = first.rbegin(); it != first.rend(); ++it) {
    const bool everywhere = std::all_of(ranks.begin(), ranks.end(), [&](int r) {
      return by_rank_[static_cast<std::size_t>(r)].count(it->first) > 0;
    });
    if (everywhere) return it->first;
  }
  return std::nullopt;
}

std::shared_ptr<const StageStateSnapshot> SnapshotStore::get(int rank, std::int64_t steps_done) const {
  std::lock_guard lock(mutex_);
  if (rank < 0 || rank >= ranks_) return nullptr;
  const auto& mine = by_rank_[static_cast<std::size_t>(rank)];
  auto it = mine.find(steps_done);
  return it == mine.end() ? nullptr : it->second;
}

std::optional<std::pair<std::vector<checkpoint::StageShard>, std::int64_t>> SnapshotStore::shards(
    std::int64_t steps_done) const {
  std::vector<checkpoint::StageShard> out;
  std::int64_t optimizer_steps = 0;
  const int ranks = this->ranks();
  for (int r = 0; r < ranks; ++r) {
    auto s = get(r, steps_done);
    if (!s || s->marker) return std::nullopt;
    out.push_back({r, {}, [s] { return s->tensors(); }, {}});
    optimizer_steps = s->optimizer_steps();
  }
  return std::make_pair(std::move(out), optimizer_steps);
}

void SnapshotStore::put_marker(int rank, std::int64_t steps_done) {
  // A copy of that step that arrived first (fault.buddy_copies off: asked for by a
  // checkpoint) is worth more than the note.
  if (auto held = get(rank, steps_done); held && !held->marker) return;
  StageStateSnapshot marker;
  marker.steps_done = steps_done;
  marker.marker = true;
  put(rank, std::move(marker));
}

void SnapshotStore::discard_after(std::int64_t steps_done) {
  std::lock_guard lock(mutex_);
  for (auto& mine : by_rank_) mine.erase(mine.upper_bound(steps_done), mine.end());
}

void SnapshotStore::reset(int ranks) {
  if (ranks <= 0) throw std::invalid_argument("SnapshotStore: needs at least one stage");
  std::lock_guard lock(mutex_);
  ranks_ = ranks;
  by_rank_.assign(static_cast<std::size_t>(ranks), PerRank{});
}

std::size_t SnapshotStore::bytes() const {
  std::lock_guard lock(mutex_);
  std::size_t total = 0;
  for (const auto& mine : by_rank_)
    for (const auto& [step, s] : mine) total += s->bytes();
  return total;
}

}  // namespace conveyor
