#pragma once
// The order in which Gloo's ring all-reduce (gloo::allreduce, Algorithm::RING, libgloo
// 0.0~git20220518, the replica groups' collective: transport/collective/gloo) adds the R
// ranks' values of one element, so that one replica standing for R configured ones
// (actors/worker/share_gradients.hpp) can add its R gradient shares in that same order
// and end with the group's bits for any R, not only R = 2.
//
// The ring splits a buffer of n f32 (4n bytes) into segments of
//   segment = roundUp(min(ceil(4n / 2R), max_segment), 4) bytes,
// numSegments = roundUp(max(ceil(4n / segment), 2R), R) of them, numSegments / R per
// rank's chunk; element e lies in segment 4e / segment and chunk c = that / (numSegments
// / R). In the reduce-scatter, chunk c's segments start as rank c − 1's values and travel
// down the ring, each rank adding its own to what it received, so rank c ends with
//   v[c] + (v[c+1] + (… + (v[c−2] + v[c−1])))     (ranks mod R)
// and the all-gather copies that to every rank; the group then divides by R. Float
// addition is commutative, so only that nesting matters. For R = 2 it is v0 + v1 for
// every element.
// What must hold: the bucket is the group's unit (one all-reduce per bucket of
// StageModel::gradient_buckets(), its spans in order), so `element` counts within it.
// Pure logic, tested against a real Gloo group (tests/actors/worker/gloo_ring_order_test.cpp).
#include <cstddef>
#include <vector>

namespace conveyor {

/// The bound of a ring segment: none. Upstream Gloo's source bounds them at
/// AllreduceOptions::maxSegmentSize (1 MiB), but the libgloo linked here does not apply it
/// to this ring (measured against real groups up to 9 M f32: segments of 4n / 2R bytes;
/// tests/actors/worker/gloo_ring_order_test.cpp fails should another build apply it).
inline constexpr std::size_t kGlooMaxSegmentBytes = ~std::size_t{0};

/// Where a ring all-reduce of `elements` f32 over `ranks` puts its elements (see the top).
struct GlooRingLayout {
  std::size_t segment_elements = 1;   // f32 per segment
  std::size_t segments_per_rank = 2;  // segments of one rank's chunk
  /// The rank c whose chunk holds `element` (counted within the all-reduce's buffer).
  int chunk_of(std::size_t element) const {
    return static_cast<int>(element / segment_elements / segments_per_rank);
  }
};

/// The layout of one all-reduce. Throws std::invalid_argument unless ranks >= 2 and
/// elements >= 1.
GlooRingLayout gloo_ring_layout(std::size_t elements, int ranks,
                                std::size_t max_segment_bytes = kGlooMaxSegmentBytes);

/// The ranks in the order chunk `chunk`'s sum takes their values: rank chunk − 1 first,
/// then each rank below it, rank `chunk` last (see the top). REQUIRES: 0 <= chunk < ranks.
std::vector<int> gloo_ring_order(int ranks, int chunk);

/// The sum of value_of(r) over `order` (gloo_ring_order's) as the ring adds them: each
/// next rank's value plus the sum so far. The one place that order of additions is
/// written: gloo_ring_sum and the gradient shares' combine (share_gradients.cpp) call it.
template <class ValueOf>
float sum_in_ring_order(const std::vector<int>& order, ValueOf value_of) {
  float sum = value_of(order[0]);
  for (std::size_t k = 1; k < order.size(); ++k) sum = value_of(order[k]) + sum;
  return sum;
}

/// `values[r]`: rank r's value of one element in chunk `chunk`; their sum in the ring's
/// order (see the top), before the division by the rank count.
float gloo_ring_sum(const float* values, int ranks, int chunk);

}  // namespace conveyor
