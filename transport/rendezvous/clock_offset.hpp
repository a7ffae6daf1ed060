#pragma once
// Clock offset of this host against the rendezvous server, NTP-style. Pure arithmetic:
// the client gathers the samples (client.cpp), this file turns them into an estimate.
//
// One sample is one round trip, all times in nanoseconds:
//   t0 local_send      client clock, just before the probe is written
//   t1 remote_receive  server clock, when the probe was decoded
//   t2 remote_send     server clock, just before the reply was written
//   t3 local_receive   client clock, when the reply was decoded
// offset = ((t1 - t0) + (t2 - t3)) / 2   (server time − local time; add it to a local
//                                          timestamp to express it on the server's clock)
// rtt    = (t3 - t0) - (t2 - t1)          (time on the wire, server work excluded)
// The error of one sample's offset is at most rtt / 2, so the min-RTT sample is kept.
#include <chrono>
#include <cstdint>
#include <span>

namespace conveyor::rendezvous {

struct ClockSample {
  std::int64_t local_send_ns = 0;
  std::int64_t remote_receive_ns = 0;
  std::int64_t remote_send_ns = 0;
  std::int64_t local_receive_ns = 0;
};

struct ClockEstimate {
  std::chrono::nanoseconds offset{0};  // server − local
  std::chrono::nanoseconds rtt{0};
};

std::chrono::nanoseconds round_trip(const ClockSample& s);
std::chrono::nanoseconds offset_of(const ClockSample& s);
/// Index of the sample with the smallest round trip (the first on ties).
/// REQUIRES: !samples.empty() (throws std::invalid_argument otherwise).
std::size_t best_sample(std::span<const ClockSample> samples);
/// The offset and rtt of best_sample(samples).
ClockEstimate estimate_clock_offset(std::span<const ClockSample> samples);

}  // namespace conveyor::rendezvous
