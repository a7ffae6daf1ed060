#include "transport/rendezvous/clock_offset.hpp"

#include <stdexcept>

namespace conveyor::rendezvous {

std::chrono::nanoseconds round_trip(const ClockSample& s) {
  return std::chrono::nanoseconds((s.local_receive_ns - s.local_send_ns) -
                                  (s.remote_send_ns - s.remote_receive_ns));
}

std::chrono::nanoseconds offset_of(const ClockSample& s) {
  // Halving each difference before adding keeps the sum in range for clocks far apart.
  const std::int64_t a = s.remote_receive_ns - s.local_send_ns;
  const std::int64_t b = s.remote_send_ns - s.local_receive_ns;
  return std::chrono::nanoseconds(a / 2 + b / 2 + (a % 2 + b % 2) / 2);
}

std::size_t best_sample(std::span<const ClockSample> samples) {
  if (samples.empty()) throw std::invalid_argument("rendezvous: no clock samples to estimate from");
  std::size_t best = 0;
  for (std::size_t i = 1; i < samples.size(); ++i)
    if (round_trip(samples[i]) < round_trip(samples[best])) best = i;
  return best;
}

ClockEstimate estimate_clock_offset(std::span<const ClockSample> samples) {
  const ClockSample& s = samples[best_sample(samples)];
  return {offset_of(s), round_trip(s)};
}

}  // namespace conveyor::rendezvous
