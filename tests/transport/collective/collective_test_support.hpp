#pragma once
// Helpers for the gradient all-reduce tests: ranks as threads of this process, a real
// rendezvous server on loopback (tests/transport/rendezvous/test_server.hpp), gradients
// filled with random values in [-1, 1] that are never zero, so that a bucket that was not
// reduced, reduced twice or only partly shows.
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tests/transport/rendezvous/test_server.hpp"
#include "transport/collective/gradient_bucket.hpp"

namespace conveyor::collective_testing {

// One thread per rank, and the message of what a call throws: the rendezvous tests' own.
using testing::error_of;
using testing::run_ranks;

inline std::vector<float> random_gradient(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> out(n);
  for (auto& v : out) {
    do v = value(rng);
    while (v == 0.0f);
  }
  return out;
}

/// A stage's gradients grouped into buckets: buffers[bucket][buffer] (host f32).
struct HostBuckets {
  std::vector<std::vector<std::vector<float>>> buffers;

  /// Bucket `b` as the all-reduce sees it: pointers into `buffers`.
  GradientBucket bucket(std::size_t b) {
    GradientBucket out{.index = b, .buffers = {}};
    for (auto& v : buffers[b])
      out.buffers.push_back({v.empty() ? nullptr : v.data(), v.size(), DType::f32});
    return out;
  }
  BucketLayout layout() const {
    BucketLayout out;
    for (const auto& bucket : buffers) {
      std::size_t n = 0;
      for (const auto& v : bucket) n += v.size();
      out.push_back({n, DType::f32});
    }
    return out;
  }
};

/// Random buckets with these buffer sizes; the seed depends on rank and position only.
inline HostBuckets random_buckets(const std::vector<std::vector<std::size_t>>& sizes,
                                  std::uint64_t rank_seed) {
  HostBuckets out;
  for (std::size_t b = 0; b < sizes.size(); ++b) {
    out.buffers.emplace_back();
    for (std::size_t i = 0; i < sizes[b].size(); ++i)
      out.buffers.back().push_back(random_gradient(sizes[b][i], rank_seed * 1000 + b * 100 + i));
  }
  return out;
}

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace conveyor::collective_testing
