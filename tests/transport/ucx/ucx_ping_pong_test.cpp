// The ping-pong microbenchmark runs between two workers and reports sane numbers.
#include "transport/ucx/ucx_ping_pong.hpp"

#include <doctest/doctest.h>

#include "tests/transport/ucx/ucx_test_support.hpp"

using namespace conveyor;
using namespace conveyor::ucx_test;

TEST_CASE("UCX ping-pong reports latency and bandwidth for small and large messages") {
  for (std::size_t bytes : {std::size_t{8}, std::size_t{1} << 20}) {
    const PingPongResult r = ucx_ping_pong(bytes, 20, test_options("bench"));
    MESSAGE(bytes << " B: round trip " << r.round_trip_us << " us, one way " << r.latency_us
                  << " us, " << r.bandwidth_gbs << " GB/s");
    CHECK(r.bytes == bytes);
    CHECK(r.iterations == 20);
    CHECK(r.latency_us > 0);
    CHECK(r.latency_us * 2 == doctest::Approx(r.round_trip_us));
    CHECK(r.bandwidth_gbs > 0);
  }
  CHECK_THROWS_AS(ucx_ping_pong(3, 1, test_options("bench")), std::invalid_argument);
  CHECK_THROWS_AS(ucx_ping_pong(8, 0, test_options("bench")), std::invalid_argument);
}
