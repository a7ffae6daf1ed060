#include "actors/runtime/detached_threads.hpp"

#include <caf/thread_hook.hpp>
#include <pthread.h>

#include <cstdio>
#include <cstring>

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

constexpr std::chrono::seconds kAwaitLimit{60};

}  // namespace

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
  if (threads_->await_all(kAwaitLimit)) return;
  // A thread still inside a stage's compute: ~actor_system waits for it regardless.
  std::fprintf(stderr, "conveyor: %lld stage thread(s) still running %lld s after the run ended; waiting\n",
               static_cast<long long>(threads_->running()), static_cast<long long>(kAwaitLimit.count()));
}

}  // namespace conveyor
