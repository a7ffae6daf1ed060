#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "transport/rendezvous/log_throttle.hpp"

using conveyor::rendezvous::LogThrottle;
using std::chrono::milliseconds;
using Lines = std::vector<std::string>;

TEST_CASE("a throttle writes the first lines of a window one by one and sums up the rest once it is over") {
  LogThrottle throttle("dropped or refused connections", 2, milliseconds(1000));
  const auto t = LogThrottle::Clock::time_point{} + milliseconds(5000);
  CHECK(throttle.add("rendezvous: dropped a", t) == Lines{"rendezvous: dropped a"});
  CHECK(throttle.add("rendezvous: dropped b", t + milliseconds(1)) == Lines{"rendezvous: dropped b"});
  for (int i = 0; i < 1000; ++i) CHECK(throttle.add("rendezvous: dropped c" + std::to_string(i), t).empty());
  CHECK_FALSE(throttle.flush(t + milliseconds(999)));  // the window is still open
  CHECK(throttle.flush(t + milliseconds(1000)) ==
        "rendezvous: 1000 more dropped or refused connections in 1 s, not logged one by one; the last: "
        "dropped c999");
  CHECK_FALSE(throttle.flush(t + milliseconds(5000)));  // said once
  // A new window: lines pass again.
  CHECK(throttle.add("rendezvous: dropped d", t + milliseconds(7000)) == Lines{"rendezvous: dropped d"});
}

TEST_CASE("a line after a window with held-back lines writes their summary first") {
  LogThrottle throttle("dropped or refused connections", 1, milliseconds(100));
  const auto t = LogThrottle::Clock::time_point{} + milliseconds(5000);
  CHECK(throttle.add("a", t).size() == 1);
  CHECK(throttle.add("b", t).empty());
  CHECK(throttle.add("c", t + milliseconds(150)) ==
        Lines{"rendezvous: 1 more dropped or refused connections in 100 ms, not logged one by one; the "
              "last: b",
              "c"});
}

TEST_CASE("a forced flush sums up an open window, and a window without held-back lines says nothing") {
  LogThrottle throttle("dropped or refused connections", 1, milliseconds(10'000));
  const auto t = LogThrottle::Clock::time_point{} + milliseconds(5000);
  CHECK_FALSE(throttle.flush(t, true));
  CHECK(throttle.add("a", t).size() == 1);
  CHECK_FALSE(throttle.flush(t + milliseconds(20'000)));
  CHECK(throttle.add("b", t + milliseconds(30'000)).size() == 1);
  CHECK(throttle.add("c", t + milliseconds(30'000)).empty());
  CHECK(throttle.flush(t + milliseconds(30'250), true) ==
        "rendezvous: 1 more dropped or refused connections in 250 ms, not logged one by one; the last: c");
}

TEST_CASE("any number of lines over any time gives at most burst + 1 lines per window") {
  LogThrottle throttle("dropped or refused connections", 3, milliseconds(100));
  const auto t0 = LogThrottle::Clock::time_point{} + milliseconds(5000);
  std::size_t written = 0;
  for (int i = 0; i < 100'000; ++i)  // one line every 0.1 ms for 10 s: 100 windows
    written += throttle.add("x", t0 + std::chrono::microseconds(100 * i)).size();
  written += throttle.flush(t0 + milliseconds(20'000), true).has_value();
  CHECK(written <= 100 * (3 + 1) + 1);
  CHECK(written >= 100 * 3);
}
