// The Gloo group's all-gather (ZeRO-1, optim.shard_state): R ranks as threads over real
// loopback TCP. Each rank owns one part of a few buffers' flat array; afterwards every
// rank holds every owner's bits, between buckets averaged by the same group.
#include <doctest/doctest.h>

#include <cstring>
#include <numeric>
#include <stdexcept>

#include "tests/transport/collective/collective_test_support.hpp"
#include "transport/collective/gloo/gloo_gradient_all_reduce.hpp"

namespace conveyor {
namespace {

using namespace collective_testing;

// Parameters of odd sizes, cut by parts that cross buffer boundaries.
const std::vector<std::vector<std::size_t>> kParams = {{5, 1, 1000, 3, 0, 77}};

GlooGroupOptions options(int rank, int size, const BucketLayout& layout) {
  GlooGroupOptions o;
  o.group = {.name = "stage 0", .rank = rank, .size = size, .generation = 0};
  o.layout = layout;
  o.timeout = std::chrono::milliseconds(10'000);
  return o;
}

void check_gather(int R, const std::vector<std::size_t>& counts) {
  CAPTURE(R);
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  std::vector<HostBuckets> inputs, results(R);
  for (int r = 0; r < R; ++r) inputs.push_back(random_buckets(kParams, 31 + r));
  const std::size_t total = inputs[0].layout()[0].elements;
  REQUIRE(std::accumulate(counts.begin(), counts.end(), std::size_t{0}) == total);
  run_ranks(R, [&](int rank) {
    RendezvousClient store(testing::client_options(server));
    // The parameters and a gradient bucket of the same sizes: averaged, then gathered.
    HostBuckets grads = random_buckets(kParams, 7 + rank);
    GlooGradientAllReduce group(store, options(rank, R, grads.layout()));
    group.start(grads.bucket(0))->wait();
    results[rank] = inputs[rank];
    group.all_gather(results[rank].bucket(0).buffers, counts);
  });
  // Flat position k comes from the rank whose part holds it.
  auto flat = [](const HostBuckets& h) {
    std::vector<float> out;
    for (const auto& v : h.buffers[0]) out.insert(out.end(), v.begin(), v.end());
    return out;
  };
  std::vector<float> expected;
  for (int owner = 0; owner < R; ++owner) {
    const auto part = flat(inputs[owner]);
    const std::size_t begin =
        std::accumulate(counts.begin(), counts.begin() + owner, std::size_t{0});
    expected.insert(expected.end(), part.begin() + begin, part.begin() + begin + counts[owner]);
  }
  for (int r = 0; r < R; ++r) {
    CAPTURE(r);
    const auto got = flat(results[r]);
    REQUIRE(got.size() == expected.size());
    CHECK(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("gloo all-gather gives every rank every owner's part, bitwise") {
  check_gather(2, {543, 543});
  check_gather(3, {362, 362, 362});
  check_gather(3, {0, 1000, 86});  // a rank with nothing to give
}

TEST_CASE("gloo all-gather refuses parts that do not add up, before sending anything") {
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  RendezvousClient store(testing::client_options(server));
  HostBuckets data = random_buckets({{4, 6}}, 3);
  const HostBuckets before = data;
  GlooGradientAllReduce group(store, options(0, 1, data.layout()));
  CHECK_THROWS_AS(group.all_gather(data.bucket(0).buffers, {9}), std::invalid_argument);
  CHECK_THROWS_AS(group.all_gather(data.bucket(0).buffers, {5, 5}), std::invalid_argument);
  group.all_gather(data.bucket(0).buffers, {10});  // a group of one: nothing moves
  CHECK(data.buffers == before.buffers);
}

}  // namespace
}  // namespace conveyor
