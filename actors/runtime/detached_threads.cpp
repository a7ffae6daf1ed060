#include "actors/runtime/detached_threads.hpp"

#include <caf/thread_hook.hpp>
#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>

namespace conveyor {
namespace {

// CAF names a detached actor's thread "caf.actor" (its scheduler workers and clock have
// other names) and calls thread_terminates() on it once the actor is cleaned up and gone.
// One more thread of that name, CAF's own, ends only inside ~actor_system after the
// workers stopped: after any wait, so it never ends one early.
class CountEndedActorThreads final : public caf::thread_hook {
 public:
  explicit CountEndedActorThreads(std::shared_ptr<DetachedThreads> threads) : threads_(std::move(threads)) {}
  void init(caf::actor_system&) override {}
  void thread_started() override {}
  void thread_terminates() override {
    char name[16] = {};
    if (pthread_getname_np(pthread_self(), name, sizeof name) == 0 && std::strcmp(name, "caf.actor") == 0)
      threads_->ended();
  }

 private:
  std::shared_ptr<DetachedThreads> threads_;
};

std::atomic<bool> g_abandoned{false};

}  // namespace

bool stage_threads_abandoned() { return g_abandoned.load(); }

std::shared_ptr<DetachedThreads> DetachedThreads::install(caf::actor_system_config& cfg) {
  auto threads = std::make_shared<DetachedThreads>();
  cfg.add_thread_hook<CountEndedActorThreads>(threads);
  return threads;
}

void DetachedThreads::spawned() {
  std::lock_guard lock(mutex_);
  ++spawned_;
}

void DetachedThreads::ended() {
  {
    std::lock_guard lock(mutex_);
    ++ended_;
  }
  changed_.notify_all();
}

bool DetachedThreads::await_all(std::chrono::milliseconds limit) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, limit, [&] { return ended_ >= spawned_; });
}

std::int64_t DetachedThreads::running() {
  std::lock_guard lock(mutex_);
  return spawned_ - ended_;
}

AwaitDetachedThreads::~AwaitDetachedThreads() {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + limit_;
  bool ended = threads_->await_all(limit_);
  // Scheduled actors too: ~actor_system waits for every running one (a scheduled stage
  // stuck in its compute holds a scheduler thread and never finishes).
  while (ended && system_ && system_->registry().running() > 0) {
    if (Clock::now() >= deadline) {
      ended = false;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (ended || !system_) return;
  // A stage stuck inside its compute (its peers, done, wait for it to let go of their
  // handles): destroying the system would wait for it forever.
  std::fprintf(stderr,
               "conveyor: a stage is still running %.0f s after the run ended (stuck in its compute; "
               "%lld stage thread(s) and %zu actor(s) left); exiting without waiting for it\n",
               std::chrono::duration<double>(limit_).count(), static_cast<long long>(threads_->running()),
               system_->registry().running());
  g_abandoned.store(true);
  (void)system_.release();  // never destroyed: the process ends with std::_Exit
}

}  // namespace conveyor
