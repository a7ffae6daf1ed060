// Gloo's ring order (actors/worker/gloo_ring_order.hpp) against a real Gloo group: every
// element of a bucket averaged by R ranks equals the sum in the order the layout gives,
// divided by R, bit for bit; the plain left-to-right sum does not.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "actors/job/replica_groups.hpp"
#include "actors/worker/gloo_ring_order.hpp"

using namespace conveyor;

namespace {

// Values of many magnitudes and both signs: the order of the additions shows in the bits.
std::vector<float> values_of(int rank, std::size_t n) {
  std::mt19937 random(static_cast<std::uint32_t>(1000 + rank));
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  std::vector<float> v(n);
  for (auto& x : v) x = std::ldexp(mantissa(random), exponent(random));
  return v;
}

// Each rank's buffer after the group averaged one bucket of `n` f32.
std::vector<std::vector<float>> gloo_average(int ranks, std::size_t n) {
  ReplicaGroups groups(ranks, std::chrono::milliseconds(30'000));
  std::vector<std::vector<float>> buffers;
  for (int r = 0; r < ranks; ++r) buffers.push_back(values_of(r, n));
  std::vector<std::string> errors(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        auto group = groups.join(0, r, {BucketShape{n, DType::f32}}, Device::cpu());
        auto& mine = buffers[static_cast<std::size_t>(r)];
        group->start(GradientBucket{0, {GradientBuffer{mine.data(), n, DType::f32}}})->wait();
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors) REQUIRE(e.empty());
  return buffers;
}

void check_ring_order(int ranks, std::size_t n) {
  CAPTURE(ranks);
  CAPTURE(n);
  const auto averaged = gloo_average(ranks, n);
  const GlooRingLayout ring = gloo_ring_layout(n, ranks);
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < ranks; ++r) inputs.push_back(values_of(r, n));
  std::size_t mismatches = 0, plain_differs = 0;
  std::vector<float> v(static_cast<std::size_t>(ranks));
  for (std::size_t e = 0; e < n; ++e) {
    for (int r = 0; r < ranks; ++r) v[static_cast<std::size_t>(r)] = inputs[static_cast<std::size_t>(r)][e];
    const float want = gloo_ring_sum(v.data(), ranks, ring.chunk_of(e)) / static_cast<float>(ranks);
    if (std::memcmp(&want, &averaged[0][e], sizeof want) != 0) ++mismatches;
    float plain = v[0];
    for (int r = 1; r < ranks; ++r) plain += v[static_cast<std::size_t>(r)];
    plain /= static_cast<float>(ranks);
    if (std::memcmp(&plain, &averaged[0][e], sizeof plain) != 0) ++plain_differs;
  }
  CHECK(mismatches == 0);
  // Every rank holds the same bits (the all-gather copies the owner's sum).
  for (int r = 1; r < ranks; ++r)
    CHECK(std::memcmp(averaged[0].data(), averaged[static_cast<std::size_t>(r)].data(), n * sizeof(float)) == 0);
  // The test can tell orders apart: the plain sum misses elements of large enough buckets.
  if (n >= 1000) CHECK(plain_differs > 0);
}

}  // namespace

TEST_CASE("Gloo's ring over 3 and 4 ranks adds each element in the order of its chunk, bit for bit") {
  for (int ranks : {3, 4})
    for (std::size_t n : {std::size_t{1}, std::size_t{5}, std::size_t{7}, std::size_t{1000}, std::size_t{12'345}})
      check_ring_order(ranks, n);
}

TEST_CASE("large buckets: the ring's segments are not bounded by Gloo's 1 MiB here, and the order follows them") {
  // The libgloo linked here (0.0~git20220518) cuts a bucket into 2R segments however large
  // (its maxSegmentSize of 1 MiB does not apply to this ring): at 9 M f32 over 3 ranks,
  // segments of 1.5 M. A Gloo that bounded them would fail here (and in the shrink's
  // bitwise tests), not silently differ.
  CHECK(gloo_ring_layout(9'000'000, 3).segment_elements == 1'500'000);
  CHECK(gloo_ring_layout(9'000'000, 3).segments_per_rank == 2);
  check_ring_order(3, 1'700'000);
  check_ring_order(3, 9'000'000);
  // Upstream Gloo's bound, for a build that applies it: 1 MiB segments, more per rank.
  const GlooRingLayout bounded = gloo_ring_layout(9'000'000, 3, 1024 * 1024);
  CHECK(bounded.segment_elements == 262'144);
  CHECK(bounded.segments_per_rank == 12);
}

TEST_CASE("the ring layout's chunks: equal runs of segments, the last ranks' possibly short or empty") {
  // 10 f32 over 3 ranks: segments of ceil(40 / 6) = 7 → 8 bytes (2 f32), 6 of them, 2 a rank.
  const GlooRingLayout ring = gloo_ring_layout(10, 3);
  CHECK(ring.segment_elements == 2);
  CHECK(ring.segments_per_rank == 2);
  CHECK(ring.chunk_of(0) == 0);
  CHECK(ring.chunk_of(3) == 0);
  CHECK(ring.chunk_of(4) == 1);
  CHECK(ring.chunk_of(9) == 2);
  // One element: rank 0's chunk; 2 ranks add v0 + v1 whatever the chunk.
  CHECK(gloo_ring_layout(1, 4).chunk_of(0) == 0);
  const float two[2] = {0.1f, 1e8f};
  CHECK(gloo_ring_sum(two, 2, 0) == gloo_ring_sum(two, 2, 1));
  // Chunk c of 3: v[c−1] first, then v[c−2], then v[c].
  const float three[3] = {1e8f, 1.0f, -1e8f};
  CHECK(gloo_ring_sum(three, 3, 0) == 1e8f + (1.0f + -1e8f));   // c = 0: v2, v1, v0
  CHECK(gloo_ring_sum(three, 3, 1) == 1.0f + (1e8f + -1e8f));   // c = 1: v0, v2, v1
  CHECK(gloo_ring_order(3, 0) == std::vector<int>{2, 1, 0});
  CHECK(gloo_ring_order(3, 1) == std::vector<int>{0, 2, 1});
  CHECK(gloo_ring_order(4, 3) == std::vector<int>{2, 1, 0, 3});
  CHECK_THROWS_AS(gloo_ring_layout(0, 3), std::invalid_argument);
  CHECK_THROWS_AS(gloo_ring_layout(5, 1), std::invalid_argument);
}
