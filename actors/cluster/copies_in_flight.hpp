#pragma once
// The snapshot copies a keeper (snapshot_keeper.hpp) is still receiving: their bytes come
// on a channel thread after the SnapshotCopy message, so the keeper's store shows a copy
// only some time after the stage sent it. The standby counts them to say, at the end of a
// run, which copies it holds: the last snapshot's copy is sent as the run ends.
// Thread-safety: every member may be called from any thread.
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace conveyor {

class CopiesInFlight {
 public:
  /// A copy's receives were posted.
  void begin() {
    std::lock_guard lock(mutex_);
    ++count_;
  }
  /// A copy arrived whole, or failed. REQUIRES: a begin() before.
  void end() {
    std::lock_guard lock(mutex_);
    if (--count_ == 0) idle_.notify_all();
  }
  /// Blocks until no copy is in flight; false when some still are after `timeout`.
  bool wait_idle(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return idle_.wait_for(lock, timeout, [&] { return count_ == 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable idle_;
  int count_ = 0;
};

}  // namespace conveyor
