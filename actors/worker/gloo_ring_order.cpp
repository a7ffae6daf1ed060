#include "actors/worker/gloo_ring_order.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace conveyor {
namespace {

std::size_t round_up(std::size_t value, std::size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

}  // namespace

GlooRingLayout gloo_ring_layout(std::size_t elements, int ranks, std::size_t max_segment_bytes) {
  if (ranks < 2 || elements == 0)
    throw std::invalid_argument("gloo_ring_layout: a ring of " + std::to_string(ranks) + " ranks over " +
                                std::to_string(elements) + " elements (needs 2 ranks and 1 element)");
  // Gloo's arithmetic, in bytes (gloo/allreduce.cc, ring()).
  constexpr std::size_t kBytes = sizeof(float);
  const std::size_t r = static_cast<std::size_t>(ranks);
  const std::size_t total = elements * kBytes;
  const std::size_t max_segment = kBytes * (max_segment_bytes / kBytes);
  const std::size_t segment = round_up(std::min((total + 2 * r - 1) / (2 * r), max_segment), kBytes);
  const std::size_t segments = round_up(std::max((total + segment - 1) / segment, 2 * r), r);
  return GlooRingLayout{segment / kBytes, segments / r};
}

std::vector<int> gloo_ring_order(int ranks, int chunk) {
  std::vector<int> order;
  for (int k = 1; k <= ranks; ++k) order.push_back((chunk + ranks - k) % ranks);
  return order;
}

float gloo_ring_sum(const float* values, int ranks, int chunk) {
  return sum_in_ring_order(gloo_ring_order(ranks, chunk), [values](int r) { return values[r]; });
}

}  // namespace conveyor
