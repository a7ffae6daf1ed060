#include "transport/rendezvous/liveness_watch.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <memory>
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

void LivenessWatch::run() {
  std::set<std::uint32_t> reported;  // silent ever since they were reported
  try {
    RendezvousClient client(options_.store);
    client.join(options_.rank, options_.world_size, options_.store.io_timeout);
    do {
      client.heartbeat();
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
      loss.silent_ranks = std::move(fresh);
      if (!report(loss) || !options_.keep_watching) return;
    } while (pause());
  } catch (const std::exception& e) {
    report(LivenessLoss{{}, e.what()});
  }
}

}  // namespace conveyor
