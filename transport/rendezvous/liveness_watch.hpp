#pragma once
// Heartbeats through the rendezvous store, and the first sign that a peer process is gone.
//
// A thread of its own with a connection of its own (the main client blocks in waits):
// every `interval` it marks this rank alive and asks the store for ranks silent longer
// than `max_silence`. The first silent rank, or the store itself becoming unreachable
// (node 0 hosts it, so that is how the other nodes see node 0 die), is reported once
// through the callback, on the watch's thread; then the watch stops. With
// keep_watching (a job that waits for lost processes to rejoin), it goes on instead:
// each rank is reported again only after it was seen alive in between (its replacement
// joined, then died too); the store becoming unreachable still ends the watch. A process that is
// killed stops heartbeating at once, so a peer learns of it within about max_silence
// whether or not any connection to it reports an error.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "transport/rendezvous/client.hpp"

namespace conveyor {

struct LivenessOptions {
  /// Where the store is; the watch opens its own connection with these.
  RendezvousClientOptions store;
  std::uint32_t rank = 0;
  std::uint32_t world_size = 1;
  std::chrono::milliseconds interval{250};
  /// A rank silent this long is dead. Must exceed interval by a margin for scheduling
  /// hiccups of a loaded machine.
  std::chrono::milliseconds max_silence{5000};
  bool keep_watching = false;
  /// The rank that decides losses (node 0): it marks every rank it reports silent in the
  /// store (lost_mark_key), so that rank learns it was declared lost when it runs again.
  bool marks_losses = false;
  /// Called once, on the watch's thread, when this rank finds it was declared lost after
  /// it joined (its mark changed: it was frozen, stopped or cut off for longer than
  /// max_silence); the watch then stops. Empty: not looked for.
  std::function<void(const std::string& detail)> on_declared_lost;
};

/// "lost/<rank>": how many times the deciding rank declared `rank` lost.
std::string lost_mark_key(std::uint32_t rank);

struct LivenessLoss {
  /// Ranks silent longer than max_silence and not reported before, ascending; empty when
  /// the store was unreachable.
  std::vector<std::uint32_t> silent_ranks;
  /// One line saying what was seen ("rank 1 silent for more than 5 s", or the store's error).
  std::string detail;
};

class LivenessWatch {
 public:
  using OnLoss = std::function<void(const LivenessLoss&)>;

  /// Starts the thread; connecting and joining happen there (a failure is a loss).
  /// REQUIRES: every rank has joined the store already (join does not wait then).
  LivenessWatch(LivenessOptions options, OnLoss on_loss);
  /// Stops the thread; no callback runs after it returns.
  ~LivenessWatch();
  LivenessWatch(const LivenessWatch&) = delete;
  LivenessWatch& operator=(const LivenessWatch&) = delete;

  /// Stops watching (a normal end: peers leaving now are not losses). Idempotent.
  void stop();

 private:
  void run();
  /// Calls on_loss_ unless stopping; false when stopping.
  bool report(const LivenessLoss& loss);
  /// Waits one interval; false once stop() was called.
  bool pause();

  LivenessOptions options_;
  OnLoss on_loss_;
  std::mutex mutex_;
  std::condition_variable stopped_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace conveyor
