#include "transport/rendezvous/liveness_watch.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <set>

namespace conveyor {

LivenessWatch::LivenessWatch(LivenessOptions options, OnLoss on_loss)
    : options_(std::move(options)), on_loss_(std::move(on_loss)) {
  thread_ = std::thread([this] { run(); });
}

LivenessWatch::~LivenessWatch() {
  stop();
  thread_.join();
}

void LivenessWatch::stop() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  stopped_.notify_all();
}

bool LivenessWatch::pause() {
  std::unique_lock lock(mutex_);
  return !stopped_.wait_for(lock, options_.interval, [&] { return stop_; });
}

bool LivenessWatch::report(const LivenessLoss& loss) {
  std::lock_guard lock(mutex_);
  // A loss seen while stopping is the normal end of the job (peers leave one by one).
  if (stop_) return false;
  on_loss_(loss);
  return true;
}

std::string lost_mark_key(std::uint32_t rank) { return fmt::format("lost/{}", rank); }

namespace {

std::optional<std::string> read_mark(RendezvousClient& client, std::uint32_t rank) {
  const auto bytes = client.get(lost_mark_key(rank));
  if (!bytes) return std::nullopt;
  return std::string(bytes->begin(), bytes->end());
}

// The deciding rank's mark on `rank`: one more declaration.
void mark_lost(RendezvousClient& client, std::uint32_t rank) {
  const auto before = read_mark(client, rank);
  client.set(lost_mark_key(rank), std::to_string(before ? std::stoll(*before) + 1 : 1));
}

}  // namespace

void LivenessWatch::run() {
  std::set<std::uint32_t> reported;  // silent ever since they were reported
  try {
    RendezvousClient client(options_.store);
    client.join(options_.rank, options_.world_size, options_.store.io_timeout);
    // Declarations before this process joined were of the process it replaces.
    const auto own_mark = options_.on_declared_lost ? read_mark(client, options_.rank) : std::nullopt;
    do {
      client.heartbeat();
      if (options_.on_declared_lost) {
        if (const auto mark = read_mark(client, options_.rank); mark != own_mark) {
          std::lock_guard lock(mutex_);
          if (stop_) return;
          options_.on_declared_lost(fmt::format(
              "node 0 declared this process (rank {}) lost: it did not run or answer for more than {} ms "
              "(stopped, frozen or cut off)",
              options_.rank, options_.max_silence.count()));
          return;
        }
      }
      auto silent = client.dead_ranks(options_.max_silence);
      std::erase(silent, options_.rank);
      std::erase_if(reported, [&](std::uint32_t r) { return !std::ranges::binary_search(silent, r); });
      std::vector<std::uint32_t> fresh;
      for (auto r : silent)
        if (reported.insert(r).second) fresh.push_back(r);
      if (fresh.empty()) continue;
      LivenessLoss loss;
      loss.detail = fmt::format("{} {} silent for more than {} ms",
                                fresh.size() == 1 ? "rank" : "ranks", fmt::join(fresh, ", "),
                                options_.max_silence.count());
      if (options_.marks_losses)
        for (auto r : fresh) mark_lost(client, r);
      loss.silent_ranks = std::move(fresh);
      if (!report(loss) || !options_.keep_watching) return;
    } while (pause());
  } catch (const std::exception& e) {
    report(LivenessLoss{{}, e.what()});
  }
}

}  // namespace conveyor
