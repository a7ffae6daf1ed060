#pragma once
// How a progress thread (UCX hub, NCCL channel) paces its polls while work is in flight:
// after a poll that found something it polls again at once; after empty ones it only
// yields for the first few (a completion is usually microseconds away), then sleeps 50 µs
// between polls, so that an idle wait does not eat the CPU of compute threads.
// One thread only.
#include <chrono>
#include <thread>

namespace conveyor {

class PollBackoff {
 public:
  /// After each poll: `busy` when it completed or started something.
  void after_poll(bool busy) {
    if (busy) {
      empty_polls_ = 0;
    } else if (++empty_polls_ < kSpinPolls) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(kIdleSleep);
    }
  }

 private:
  static constexpr int kSpinPolls = 64;
  static constexpr auto kIdleSleep = std::chrono::microseconds(50);
  int empty_polls_ = 0;
};

}  // namespace conveyor
