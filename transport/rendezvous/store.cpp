#include "transport/rendezvous/store.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace conveyor::rendezvous {

Status RendezvousStore::join(const Joiner& j, Clock::time_point now, const ProcessAlive& alive) {
  std::lock_guard lock(mu_);
  if (failure_) return Status::error(*failure_);
  if (j.world_size == 0) return Status::error(fmt::format("rank {} joined with world size 0", j.rank));
  if (world_size_ && *world_size_ != j.world_size) {
    // Rank 0 is named last when it is one of the two: its world size is the job's.
    if (j.rank == world_rank_)
      return reject(fmt::format("rank {} was started with world size {} and again with world size {}",
                                j.rank, *world_size_, j.world_size));
    if (j.rank == 0)
      return reject(fmt::format("rank {} was started with world size {}, rank 0 with world size {}",
                                world_rank_, *world_size_, j.world_size));
    return reject(fmt::format("rank {} was started with world size {}, rank {} with world size {}",
                              j.rank, j.world_size, world_rank_, *world_size_));
  }
  if (j.rank >= j.world_size)
    return Status::error(fmt::format("rank {} is out of range for world size {}", j.rank, j.world_size));
  if (auto h = holders_.find(j.rank); h != holders_.end()) {
    const Holder& first = h->second;
    const bool another_process = !j.process.empty() && !first.process.empty() && first.process != j.process;
    if (another_process && !reported_dead_.contains(j.rank) && alive && alive(first.process))
      return reject(fmt::format("rank {} joined twice: first from {}, again from {}", j.rank, first.where,
                                j.where));
  }
  if (!world_size_ || j.rank == 0) world_rank_ = j.rank;
  const Holder holder{j.process, j.where};
  auto h = holders_.find(j.rank);
  if (h == holders_.end() || h->second != holder) ++seq_;  // a standby must know
  world_size_ = j.world_size;
  last_seen_[j.rank] = now;
  holders_[j.rank] = holder;
  reported_dead_.erase(j.rank);
  return Status::ok_status();
}

Status RendezvousStore::join(std::uint32_t rank, std::uint32_t world_size, Clock::time_point now) {
  return join(Joiner{rank, world_size, "", fmt::format("rank {}", rank)}, now, nullptr);
}

Status RendezvousStore::reject(const std::string& conflict) {
  if (every_rank_joined()) return Status::error(conflict + "; refused: the job goes on without it");
  failure_ = conflict + "; the job cannot start";
  return Status::error(*failure_);
}

std::optional<std::string> RendezvousStore::failure() const {
  std::lock_guard lock(mu_);
  return failure_;
}

bool RendezvousStore::all_joined() const {
  std::lock_guard lock(mu_);
  return every_rank_joined();
}

bool RendezvousStore::every_rank_joined() const {
  // Ranks are never forgotten and the world size never changes once set: once true, it stays.
  return world_size_ && last_seen_.size() == *world_size_;
}

std::vector<std::uint32_t> RendezvousStore::missing_ranks() const {
  std::lock_guard lock(mu_);
  std::vector<std::uint32_t> missing;
  if (!world_size_) return missing;
  for (std::uint32_t r = 0; r < *world_size_; ++r)
    if (!last_seen_.contains(r)) missing.push_back(r);
  return missing;
}

Status RendezvousStore::check_joined(std::uint32_t rank, const char* what) const {
  if (!last_seen_.contains(rank))
    return Status::error(fmt::format("{} from rank {} before it joined", what, rank));
  return Status::ok_status();
}

Status RendezvousStore::arrive(const std::string& name, std::uint32_t rank,
                               std::uint64_t* generation) {
  std::lock_guard lock(mu_);
  if (Status s = check_joined(rank, "barrier"); !s.ok()) return s;
  Barrier& b = barriers_[name];
  *generation = b.generation;
  b.arrived.insert(rank);
  if (b.arrived.size() == *world_size_) {
    b.arrived.clear();
    ++b.generation;
  }
  return Status::ok_status();
}

bool RendezvousStore::passed(const std::string& name, std::uint64_t generation) const {
  std::lock_guard lock(mu_);
  auto it = barriers_.find(name);
  return it != barriers_.end() && it->second.generation > generation;
}

std::vector<std::uint32_t> RendezvousStore::barrier_missing(const std::string& name) const {
  std::lock_guard lock(mu_);
  std::vector<std::uint32_t> missing;
  if (!world_size_) return missing;
  auto it = barriers_.find(name);
  for (std::uint32_t r = 0; r < *world_size_; ++r)
    if (it == barriers_.end() || !it->second.arrived.contains(r)) missing.push_back(r);
  return missing;
}

void RendezvousStore::leave(const std::string& name, std::uint32_t rank, std::uint64_t generation) {
  std::lock_guard lock(mu_);
  auto it = barriers_.find(name);
  if (it != barriers_.end() && it->second.generation == generation) it->second.arrived.erase(rank);
}

void RendezvousStore::set(const std::string& key, Bytes value) {
  std::lock_guard lock(mu_);
  values_[key] = Value{std::move(value), ++seq_};
}

std::optional<Bytes> RendezvousStore::get(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second.bytes;
}

bool RendezvousStore::contains(const std::string& key) const {
  std::lock_guard lock(mu_);
  return values_.contains(key);
}

Status RendezvousStore::heartbeat(std::uint32_t rank, Clock::time_point now) {
  std::lock_guard lock(mu_);
  if (Status s = check_joined(rank, "heartbeat"); !s.ok()) return s;
  last_seen_[rank] = now;
  reported_dead_.erase(rank);
  return Status::ok_status();
}

std::vector<std::uint32_t> RendezvousStore::report_dead_ranks(Clock::duration max_silence,
                                                              Clock::time_point now) {
  std::lock_guard lock(mu_);
  std::vector<std::uint32_t> dead;
  for (const auto& [rank, seen] : last_seen_)
    if (now - seen > max_silence) dead.push_back(rank);
  reported_dead_.insert(dead.begin(), dead.end());
  return dead;
}

std::vector<std::uint32_t> RendezvousStore::dead_ranks(Clock::duration max_silence,
                                                       Clock::time_point now) const {
  std::lock_guard lock(mu_);
  std::vector<std::uint32_t> dead;
  for (const auto& [rank, seen] : last_seen_)
    if (now - seen > max_silence) dead.push_back(rank);
  return dead;
}

std::int64_t RendezvousStore::seq() const {
  std::lock_guard lock(mu_);
  return seq_;
}

bool RendezvousStore::following() const {
  std::lock_guard lock(mu_);
  return following_;
}

ChangesReply RendezvousStore::changes_since(std::int64_t since, std::size_t max_frame_bytes) const {
  std::lock_guard lock(mu_);
  ChangesReply out;
  out.seq = seq_;
  out.world_size = world_size_.value_or(0);
  for (const auto& [rank, h] : holders_) out.joined.push_back({rank, h.process, h.where});
  std::vector<std::pair<std::int64_t, const std::string*>> changed;  // (seq, key)
  for (const auto& [key, v] : values_)
    if (v.seq > since) changed.emplace_back(v.seq, &key);
  std::ranges::sort(changed);
  std::size_t length = changes_frame_length(out);
  for (const auto& [seq, key] : changed) {
    const Bytes& bytes = values_.find(*key)->second.bytes;
    length += changed_value_bytes(*key, bytes);
    if (length > max_frame_bytes && !out.values.empty()) {
      out.seq = seq - 1;  // every change before this value's is in (the ranks always are)
      break;
    }
    out.values.push_back({*key, bytes});
  }
  return out;
}

Status RendezvousStore::adopt(const ChangesReply& changes, Clock::time_point now) {
  std::lock_guard lock(mu_);
  if (!following_)
    return Status::error("this store serves as a primary (promoted, or never a follower): "
                         "it takes no changes from another");
  if (changes.world_size != 0 && world_size_ && *world_size_ != changes.world_size)
    return Status::error(fmt::format("the primary's world size is {}, but {} was mirrored before",
                                     changes.world_size, *world_size_));
  if (changes.world_size != 0) world_size_ = changes.world_size;
  bool membership = false;
  for (const JoinedRank& j : changes.joined) {
    const Holder holder{j.process, j.where};
    auto [h, added] = holders_.try_emplace(j.rank, holder);
    if (!added && h->second == holder) continue;
    h->second = holder;
    last_seen_.try_emplace(j.rank, now);
    membership = true;
  }
  if (membership) {
    ++seq_;
    world_rank_ = holders_.contains(0) ? 0 : holders_.begin()->first;
  }
  for (const ChangedValue& v : changes.values) values_[v.key] = Value{v.value, ++seq_};
  return Status::ok_status();
}

void RendezvousStore::promote(Clock::time_point now) {
  std::lock_guard lock(mu_);
  if (!following_) return;
  following_ = false;
  for (auto& [rank, seen] : last_seen_) seen = now;
  reported_dead_.clear();
}

}  // namespace conveyor::rendezvous
