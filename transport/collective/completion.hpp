#pragma once
// The outcome of one background operation, shared by the thread that runs it and the
// threads that wait for it: pending, then succeeded or failed with an exception (rethrown
// to every waiter, with its type: CollectiveTimeout stays a CollectiveTimeout).
// Thread-safety: every member may be called from any thread.
#include <condition_variable>
#include <exception>
#include <mutex>

namespace conveyor {

class Completion {
 public:
  void succeed() { finish(nullptr); }
  /// REQUIRES: error != nullptr.
  void fail(std::exception_ptr error) { finish(std::move(error)); }

  /// Blocks until the outcome is known; rethrows a failure.
  void wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return finished_; });
    if (error_) std::rethrow_exception(error_);
  }
  /// Whether the outcome is known (rethrowing a failure); never blocks.
  bool done() {
    std::lock_guard lock(mu_);
    if (finished_ && error_) std::rethrow_exception(error_);
    return finished_;
  }

 private:
  void finish(std::exception_ptr error) {
    std::lock_guard lock(mu_);
    if (finished_) return;  // the first outcome stands
    finished_ = true;
    error_ = std::move(error);
    cv_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool finished_ = false;
  std::exception_ptr error_;
};

}  // namespace conveyor
