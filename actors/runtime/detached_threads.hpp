#pragma once
// Waiting for detached actors' threads before their actor system is destroyed.
//
// Why (CAF 0.17.6): a detached actor's cleanup first unregisters it from the system, and
// only last pushes a "cancel my timeouts" event into the clock's bounded queue (63 free
// slots), even when it never set a timeout. ~actor_system waits for registered actors,
// then stops the clock thread, then waits for detached threads. With more than 63 detached
// actors between those two points of their cleanup (an exit sent to hundreds of stage
// actors at once), the late ones block forever on the full queue and so does
// ~actor_system. CAF calls a thread hook's thread_terminates() on an actor's own thread
// after its whole cleanup: counting those, the owner waits until every detached thread
// has ended while the clock still runs.
//
// A stage stuck inside its compute (a kernel that never returns, a hang the watchdog
// diagnosed) never ends its thread, and ~actor_system would wait for it forever. Past a
// limit the owner gives up: the system is left alive (leaked) and the process must end
// with std::_Exit (stage_threads_abandoned()), as those threads may still use it.
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

namespace conveyor {

class DetachedThreads {
 public:
  /// Adds the hook that counts `cfg`'s system's detached-actor threads as they end.
  /// Call before the system is built from `cfg`.
  static std::shared_ptr<DetachedThreads> install(caf::actor_system_config& cfg);

  /// After each spawn<caf::detached> that returned (a failed spawn started no thread).
  void spawned();
  /// A detached actor's thread ended (the hook).
  void ended();
  /// True once every spawned thread has ended; false if `limit` passed first.
  bool await_all(std::chrono::milliseconds limit);
  /// Spawned threads not yet ended.
  std::int64_t running();

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::int64_t spawned_ = 0;
  std::int64_t ended_ = 0;
};

/// True once an AwaitDetachedThreads left its actor system alive: the process must end
/// with std::_Exit (no static destructors, no atexit handlers) after flushing its output.
bool stage_threads_abandoned();

/// Declared right after the actor system (so destroyed before it, after every actor
/// handle declared below it): waits for the detached threads and for every actor of the
/// system to end, then lets the system go. If they have not ended within the limit, it
/// releases `system` (the system is never destroyed) and marks the threads abandoned.
class AwaitDetachedThreads {
 public:
  static constexpr std::chrono::milliseconds kDefaultLimit{60'000};
  AwaitDetachedThreads(std::shared_ptr<DetachedThreads> threads, std::unique_ptr<caf::actor_system>& system,
                       std::chrono::milliseconds limit = kDefaultLimit)
      : threads_(std::move(threads)), system_(system), limit_(limit) {}
  ~AwaitDetachedThreads();
  AwaitDetachedThreads(const AwaitDetachedThreads&) = delete;
  AwaitDetachedThreads& operator=(const AwaitDetachedThreads&) = delete;

  /// A shorter wait, when a stage is known to be stuck (the watchdog fired).
  void limit_wait(std::chrono::milliseconds limit) { limit_ = std::min(limit_, limit); }

 private:
  std::shared_ptr<DetachedThreads> threads_;
  std::unique_ptr<caf::actor_system>& system_;
  std::chrono::milliseconds limit_;
};

}  // namespace conveyor
