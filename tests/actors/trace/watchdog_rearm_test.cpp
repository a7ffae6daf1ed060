// The watchdog after a recovery: rearmed, it watches again with fresh deadlines instead of
// running its on_stuck action; not rearmed, on_stuck runs after the grace period.
#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include "actors/trace/stage_probe.hpp"
#include "actors/trace/watchdog.hpp"

using namespace conveyor;
using namespace conveyor::trace;
using namespace std::chrono_literals;

namespace {

WaitForContext empty_context() {
  WaitForContext c;
  c.train_plans.resize(1);
  c.eval_plans.resize(1);
  return c;
}

template <class F>
bool eventually(F&& done, std::chrono::milliseconds limit = 5000ms) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return done();
}

}  // namespace

TEST_CASE("a rearmed watchdog looks again instead of giving up, without rearm on_stuck runs") {
  auto board = std::make_shared<ProgressBoard>(1);
  board->stage(0).publish(StageState::idle, 1, 0, false, 0, now_ns());
  std::atomic<int> fired{0}, stuck{0};
  Watchdog dog(board, empty_context(), 0.05, nullptr, [&](const HangDiagnosis&) { ++fired; },
               [&] { ++stuck; }, /*grace_s=*/0.5);
  REQUIRE(eventually([&] { return fired.load() == 1; }));
  CHECK(dog.fired());
  dog.rearm();
  CHECK(eventually([&] { return !dog.fired() || fired.load() == 2; }));
  // The stage is still stuck: the rearmed watchdog diagnoses it again...
  REQUIRE(eventually([&] { return fired.load() == 2; }));
  CHECK(stuck.load() == 0);
  // ...and, not rearmed this time, gives up after the grace period.
  CHECK(eventually([&] { return stuck.load() == 1; }));
}

TEST_CASE("a paused watchdog makes no diagnosis however long the wait, rearmed, it counts from then") {
  auto board = std::make_shared<ProgressBoard>(1);
  board->stage(0).publish(StageState::idle, 1, 0, false, 0, now_ns());
  std::atomic<int> fired{0};
  std::atomic<std::int64_t> fired_at{0};
  Watchdog dog(board, empty_context(), 0.1, nullptr, [&](const HangDiagnosis&) {
    fired_at = now_ns();
    ++fired;
  });
  dog.pause();
  std::this_thread::sleep_for(400ms);  // four timeouts with the stage idle
  CHECK(fired.load() == 0);
  const std::int64_t rearmed_at = now_ns();
  dog.rearm();
  REQUIRE(eventually([&] { return fired.load() == 1; }));
  // Not at once (the stage has been idle 0.4 s): a full timeout after the rearm.
  CHECK(fired_at.load() - rearmed_at >= 100'000'000);
}
