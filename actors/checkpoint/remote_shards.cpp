#include "actors/checkpoint/remote_shards.hpp"

#include <fmt/format.h>

#include "actors/checkpoint/checkpoint_error.hpp"
#include "actors/checkpoint/filesystem.hpp"

namespace conveyor::checkpoint {

void RemoteShards::expect(const std::string& token, int stage) {
  std::lock_guard lock(mutex_);
  slots_[{token, stage}] = Slot{};
}

bool RemoteShards::report(const std::string& token, int stage, std::optional<ShardEntry> entry,
                          std::string error) {
  {
    std::lock_guard lock(mutex_);
    const auto it = slots_.find({token, stage});
    if (it == slots_.end() || it->second.done) return false;
    if (entry && entry->stage != stage) {
      error = fmt::format("the reported shard is stage {}'s, not stage {}'s", entry->stage, stage);
      entry.reset();
    }
    if (!entry && error.empty()) error = "reported neither a shard nor an error";
    it->second = Slot{true, std::move(entry), std::move(error), std::nullopt};
  }
  changed_.notify_all();
  return true;
}

template <class Which>
void RemoteShards::fail_where(Which which, const std::string& why, std::optional<int> lost_node) {
  {
    std::lock_guard lock(mutex_);
    for (auto& [key, slot] : slots_)
      if (!slot.done && which(key)) slot = Slot{true, std::nullopt, why, lost_node};
  }
  changed_.notify_all();
}

void RemoteShards::fail_node(int node, const std::vector<int>& node_of_stage, const std::string& why) {
  fail_where(
      [&](const Key& key) {
        return key.second >= 0 && key.second < static_cast<int>(node_of_stage.size()) &&
               node_of_stage[static_cast<std::size_t>(key.second)] == node;
      },
      fmt::format("node {} was lost: {}", node, why), node);
}

void RemoteShards::fail_pending(const std::string& why) {
  fail_where([](const Key&) { return true; }, why, std::nullopt);
}

ShardEntry RemoteShards::wait(const std::string& token, int stage, std::chrono::milliseconds timeout,
                              const std::string& where) {
  std::unique_lock lock(mutex_);
  const Key key{token, stage};
  if (!slots_.count(key))
    throw CheckpointError(where, fmt::format("no shard of stage {} was asked for in this attempt", stage));
  const bool came = changed_.wait_for(lock, timeout, [&] { return slots_.at(key).done; });
  Slot slot = std::move(slots_.at(key));
  slots_.erase(key);
  if (!came)
    throw CheckpointError(where, fmt::format("stage {}'s node did not report its shard within {} s "
                                             "(checkpoint.remote_timeout_s)",
                                             stage, std::chrono::duration<double>(timeout).count()));
  if (!slot.entry)
    throw CheckpointError(where, fmt::format("stage {}'s node could not write its shard: {}", stage, slot.error),
                          slot.lost_node);
  return std::move(*slot.entry);
}

bool RemoteShards::wait_all(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] {
    for (const auto& [key, slot] : slots_)
      if (!slot.done) return false;
    return true;
  });
}

std::size_t RemoteShards::pending() const {
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (const auto& [key, slot] : slots_) n += slot.done ? 0 : 1;
  return n;
}

StageShard awaited_shard(std::shared_ptr<RemoteShards> book, const StagingTarget& target, int stage,
                         std::chrono::milliseconds timeout) {
  if (target.error.empty()) book->expect(target.token, stage);
  StageShard shard;
  shard.stage = stage;
  shard.place = [book = std::move(book), target, stage, timeout](Filesystem& fs, const std::string& step_dir) {
    if (!target.error.empty()) throw CheckpointError(target.staging, target.error);
    ShardEntry entry = book->wait(target.token, stage, timeout, target.staging);
    place_staged_shard(fs, target.staging, target.token, step_dir, entry);
    return entry;
  };
  return shard;
}

}  // namespace conveyor::checkpoint
