#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "transport/rendezvous/clock_offset.hpp"

using namespace conveyor::rendezvous;
using std::chrono::nanoseconds;

TEST_CASE("a symmetric round trip gives the exact offset and the wire time as rtt") {
  // The server clock is 1000 ns ahead; 40 ns each way; the server works 20 ns.
  const ClockSample s{0, 1040, 1060, 100};
  CHECK(offset_of(s) == nanoseconds(1000));
  CHECK(round_trip(s) == nanoseconds(80));
}

TEST_CASE("the estimate keeps the sample with the smallest round trip") {
  const std::vector<ClockSample> samples = {
      {0, 5000 + 900, 5000 + 910, 1000},       // slow and asymmetric: offset off by 445
      {2000, 5000 + 2010, 5000 + 2011, 2021},  // fastest: rtt 20, offset exact
      {3000, 5000 + 3100, 5000 + 3120, 3300},
  };
  CHECK(best_sample(samples) == 1);
  const ClockEstimate e = estimate_clock_offset(samples);
  CHECK(e.offset == nanoseconds(5000));
  CHECK(e.rtt == nanoseconds(20));
}

TEST_CASE("a server clock behind the local one gives a negative offset") {
  const ClockSample s{1'000'000, 10, 10, 1'000'020};
  CHECK(offset_of(s) == nanoseconds(-1'000'000));
}

TEST_CASE("steady clocks of hosts booted a year apart give the exact offset") {
  const std::int64_t year = 365LL * 24 * 3600 * 1'000'000'000LL;
  const ClockSample s{5, year + 15, year + 16, 26};
  CHECK(offset_of(s) == nanoseconds(year));
  CHECK(round_trip(s) == nanoseconds(20));
}

TEST_CASE("estimating from no samples is an error") {
  CHECK_THROWS_AS(estimate_clock_offset({}), std::invalid_argument);
}
