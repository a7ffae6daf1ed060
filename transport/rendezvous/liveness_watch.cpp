#include "transport/rendezvous/liveness_watch.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <memory>

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

void LivenessWatch::run() {
  LivenessLoss loss;
  try {
    RendezvousClient client(options_.store);
    client.join(options_.rank, options_.world_size, options_.store.io_timeout);
    do {
      client.heartbeat();
      auto silent = client.dead_ranks(options_.max_silence);
      std::erase(silent, options_.rank);
      if (!silent.empty()) {
        loss.detail = fmt::format("{} {} silent for more than {} ms",
                                  silent.size() == 1 ? "rank" : "ranks", fmt::join(silent, ", "),
                                  options_.max_silence.count());
        loss.silent_ranks = std::move(silent);
        break;
      }
    } while (pause());
  } catch (const std::exception& e) {
    loss.detail = e.what();
  }
  std::lock_guard lock(mutex_);
  // A loss seen while stopping is the normal end of the job (peers leave one by one).
  if (!stop_ && !loss.detail.empty()) on_loss_(loss);
}

}  // namespace conveyor
