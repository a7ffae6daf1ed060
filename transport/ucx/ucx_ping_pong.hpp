#pragma once
// Latency and bandwidth of the UCX channel: the initiator sends `bytes`, the responder
// sends them back, `iterations` times after one untimed warm-up round. One-way latency is
// half the mean round trip; bandwidth is bytes over that one-way time.
#include <cstddef>

#include "transport/ucx/ucx_worker.hpp"

namespace conveyor {

struct PingPongResult {
  std::size_t bytes = 0;
  int iterations = 0;
  double round_trip_us = 0;  // mean
  double latency_us = 0;     // one way: round_trip_us / 2
  double bandwidth_gbs = 0;  // 1e9 bytes per second, one way
};

/// Two workers in this process (one thread each) with `options` (UCX_TLS, timeout).
/// Throws std::invalid_argument unless bytes is a positive multiple of 4 and iterations >= 1.
PingPongResult ucx_ping_pong(std::size_t bytes, int iterations, const UcxOptions& options = {});

/// One side of a ping-pong over an existing connection (e.g. between two processes):
/// call with initiator = true on one side and false on the other, same bytes and
/// iterations. The responder's result has no timings.
PingPongResult ucx_ping_pong(UcxEndpoint& peer, bool initiator, std::size_t bytes, int iterations);

}  // namespace conveyor
