// A stage's gradients averaged across its replicas: one bucket per chunk through the
// process's replica groups (a Gloo group per pipeline stage over loopback), in place,
// the same bits on every replica.
#include <doctest/doctest.h>

#include <cstring>
#include <stdexcept>
#include <thread>

#include "actors/runtime/replica_groups.hpp"
#include "actors/stage/replica_gradients.hpp"

using namespace conveyor;

namespace {

// Two chunks (two and one tensors) filled from `seed`.
ChunkGradients gradients(float seed) {
  ChunkGradients g{{Tensor::zeros(Shape{3, 5}), Tensor::zeros(Shape{7})}, {Tensor::zeros(Shape{11})}};
  float x = seed;
  for (auto& chunk : g)
    for (auto& t : chunk)
      for (auto& v : t.f32_span()) v = x += 0.37f;
  return g;
}

}  // namespace

TEST_CASE("replica buckets are one f32 bucket per chunk with the chunk's element count") {
  const auto layout = replica_bucket_layout(gradients(0));
  REQUIRE(layout.size() == 2);
  CHECK(layout[0] == BucketShape{22, DType::f32});
  CHECK(layout[1] == BucketShape{11, DType::f32});
  CHECK_THROWS_AS(replica_bucket_layout({{Tensor::zeros(Shape{2}, DType::bf16)}}),
                  std::invalid_argument);
}

TEST_CASE("two replicas of two stages each end with the average of their gradients, bitwise equal") {
  ReplicaGroups groups(2, std::chrono::milliseconds(10'000));
  std::vector<ChunkGradients> inputs, results;
  for (int a = 0; a < 4; ++a) inputs.push_back(gradients(static_cast<float>(a)));
  for (int a = 0; a < 4; ++a) results.push_back(gradients(static_cast<float>(a)));
  std::vector<std::thread> threads;
  std::vector<std::string> errors(4);
  for (int a = 0; a < 4; ++a)  // actor r·2 + s: stage s of replica r, each on its own thread
    threads.emplace_back([&, a] {
      try {
        auto group = groups.join(a % 2, a / 2, replica_bucket_layout(results[a]));
        average_across_replicas(*group, results[a]);
      } catch (const std::exception& e) {
        errors[a] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int a = 0; a < 4; ++a) {
    CAPTURE(a);
    REQUIRE(errors[a].empty());
    const int peer = (a + 2) % 4;  // the same stage of the other replica
    for (std::size_t c = 0; c < results[a].size(); ++c)
      for (std::size_t t = 0; t < results[a][c].size(); ++t) {
        const auto got = results[a][c][t].f32_span();
        const auto mine = inputs[a][c][t].f32_span(), theirs = inputs[peer][c][t].f32_span();
        for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == (mine[i] + theirs[i]) / 2);
        const auto same = results[peer][c][t].f32_span();
        CHECK(std::memcmp(got.data(), same.data(), got.size_bytes()) == 0);
      }
  }
}
