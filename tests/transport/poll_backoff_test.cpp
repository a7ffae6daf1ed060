// PollBackoff: a progress thread with work in flight polls again at once after a busy
// poll, yields through its first empty polls, then waits: on its transport's events where
// it can block, else in a short sleep.
#include <doctest/doctest.h>

#include <chrono>

#include "transport/poll_backoff.hpp"

using namespace conveyor;

TEST_CASE("an idle poller blocks on its transport only after its spin polls, never after a busy poll") {
  PollBackoff backoff;
  int blocks = 0;
  const auto block = [&] {
    ++blocks;
    return true;
  };
  for (int i = 0; i < 63; ++i) backoff.after_poll(false, block);
  CHECK(blocks == 0);  // the first 63 empty polls only yield
  backoff.after_poll(false, block);
  backoff.after_poll(false, block);
  CHECK(blocks == 2);
  backoff.after_poll(true, block);  // work found: the count starts over
  CHECK(blocks == 2);
  for (int i = 0; i < 63; ++i) backoff.after_poll(false, block);
  CHECK(blocks == 2);
  backoff.after_poll(false, block);
  CHECK(blocks == 3);
}

TEST_CASE("a poller whose transport cannot block sleeps between its empty polls") {
  PollBackoff backoff;
  for (int i = 0; i < 63; ++i) backoff.after_poll(false, [] { return false; });
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 4; ++i) backoff.after_poll(false, [] { return false; });
  CHECK(std::chrono::steady_clock::now() - start >= 4 * PollBackoff::kIdleSleep);
}
