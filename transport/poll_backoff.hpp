#pragma once
// How a progress thread (UCX hub, NCCL channel) paces its polls while work is in flight:
// after a poll that found something it polls again at once; after empty ones it only
// yields for the first few (a completion is usually microseconds away), then waits
// between polls, so that an idle wait does not eat the CPU of compute threads.
// The wait: where the transport can block until it has work (UcxWorker::wait_for_event),
// it blocks, and is woken as soon as bytes arrive; else it sleeps 50 µs. A sleep while
// a bulk transfer is in flight stalls it (the socket fills, nobody drains it): two raw
// UCP processes on this repository's loaded 2-core VM moved 86–107 MB/s over TCP with
// these sleeps, 99–320 MB/s woken by the worker's events (docs/RELIABILITY.md, "A ~100
// M-parameter CPU model").
// One thread only.
#include <chrono>
#include <thread>

namespace conveyor {

class PollBackoff {
 public:
  /// The longest sleep between empty polls.
  static constexpr auto kIdleSleep = std::chrono::microseconds(50);

  /// After each poll: `busy` when it completed or started something.
  void after_poll(bool busy) {
    after_poll(busy, [] { return false; });
  }
  /// The same, with `block()` in place of the sleep: it waits for the transport's next
  /// event (bounded by the caller) and returns true, or returns false at once when it
  /// cannot wait, and then the sleep follows.
  template <class Block>
  void after_poll(bool busy, Block&& block) {
    if (busy) {
      empty_polls_ = 0;
    } else if (++empty_polls_ < kSpinPolls) {
      std::this_thread::yield();
    } else if (!block()) {
      std::this_thread::sleep_for(kIdleSleep);
    }
  }

 private:
  static constexpr int kSpinPolls = 64;
  int empty_polls_ = 0;
};

}  // namespace conveyor
