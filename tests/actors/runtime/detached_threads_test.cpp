#include <doctest/doctest.h>

#include <caf/all.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "actors/runtime/detached_threads.hpp"

namespace conveyor::testing {
namespace {

// Detached actors whose cleanup is slow where CAF 0.17.6's shutdown race opens: an
// attached functor runs after the actor unregistered from the system and before it
// pushes its cancel-timeouts event into the clock's 63-slot queue.
caf::behavior slow_to_end(caf::event_based_actor* self) {
  self->attach_functor([] { std::this_thread::sleep_for(std::chrono::milliseconds(100)); });
  return {[](int) {}};
}

// In a child process (a hang must not hang the suite): `actors` detached actors get an
// exit at once, then the system is destroyed, with or without waiting for their threads.
// Returns the child's exit status, or -1 when it was still running after `limit`.
int destroy_system_after_exit_burst(int actors, bool await_threads, std::chrono::seconds limit) {
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    caf::actor_system_config cfg;
    cfg.set("scheduler.max-threads", 2);
    auto threads = DetachedThreads::install(cfg);
    bool all_ended = true;
    {
      caf::actor_system system{cfg};
      {
        std::vector<caf::actor> all;
        for (int i = 0; i < actors; ++i) {
          all.push_back(system.spawn<caf::detached>(slow_to_end));
          threads->spawned();
        }
        for (auto& a : all) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
      }
      // What AwaitDetachedThreads does, with its answer kept: wait while the clock runs.
      if (await_threads) all_ended = threads->await_all(std::chrono::seconds(30)) && threads->running() == 0;
    }
    _exit(all_ended ? 0 : 3);
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST_CASE("an actor system with 100 detached actors ending at once is destroyed once their threads have ended") {
  // Without the wait this child hangs in ~actor_system every time (checked by hand with
  // await_threads false: killed at its 5 s limit; the threads past the 63rd block in the
  // clock's queue after the clock thread stopped).
  CHECK(destroy_system_after_exit_burst(100, /*await_threads=*/true, std::chrono::seconds(30)) == 0);
}

TEST_CASE("DetachedThreads counts spawned threads until each has ended") {
  caf::actor_system_config cfg;
  auto threads = DetachedThreads::install(cfg);
  caf::actor_system system{cfg};
  {
    auto a = system.spawn<caf::detached>(slow_to_end);
    threads->spawned();
    CHECK(threads->running() == 1);
    CHECK_FALSE(threads->await_all(std::chrono::milliseconds(50)));  // its handle keeps it alive
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }
  CHECK(threads->await_all(std::chrono::seconds(30)));
  CHECK(threads->running() == 0);
}

}  // namespace
}  // namespace conveyor::testing
