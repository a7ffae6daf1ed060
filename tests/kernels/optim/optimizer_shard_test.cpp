// ZeRO-1 at the kernel level (kernels/optim/optimizer_shard.hpp): the ranges, and AdamW on
// shards against AdamW on the whole, bitwise.
#include "kernels/optim/optimizer_shard.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/model/param_state.hpp"
#include "kernels/optim/adamw.hpp"

namespace conveyor {
namespace {

TEST_CASE("replica shards cover every element once, in rank order, balanced") {
  for (const std::int64_t total : {0, 1, 7, 10, 1001}) {
    for (const int ranks : {1, 2, 3, 4}) {
      CAPTURE(total);
      CAPTURE(ranks);
      std::int64_t next = 0;
      for (int r = 0; r < ranks; ++r) {
        const ElementRange s = replica_shard(total, r, ranks);
        CHECK(s.begin == next);
        CHECK(s.size() >= total / ranks);
        CHECK(s.size() <= total / ranks + 1);
        next = s.end;
      }
      CHECK(next == total);
      const auto sizes = replica_shard_sizes(total, ranks);
      REQUIRE(sizes.size() == static_cast<std::size_t>(ranks));
      CHECK(sizes.front() >= sizes.back());
    }
  }
  CHECK(replica_shard(10, 0, 3) == ElementRange{0, 4});
  CHECK(replica_shard(10, 2, 3) == ElementRange{7, 10});
  CHECK_THROWS_AS(replica_shard(10, 3, 3), std::invalid_argument);
  CHECK_THROWS_AS(replica_shard(10, 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(replica_shard(-1, 0, 1), std::invalid_argument);
}

TEST_CASE("a shard's overlap with one parameter, in the parameter's positions") {
  const ElementRange shard{5, 12};
  CHECK(local_overlap(shard, 0, 5).size() == 0);          // before the shard
  CHECK(local_overlap(shard, 3, 4) == ElementRange{2, 4});  // ends inside it
  CHECK(local_overlap(shard, 6, 3) == ElementRange{0, 3});  // inside it
  CHECK(local_overlap(shard, 10, 8) == ElementRange{0, 2});  // starts inside it
  CHECK(local_overlap(shard, 0, 20) == ElementRange{5, 12});  // holds it
  CHECK(local_overlap(shard, 12, 4).size() == 0);          // after it
}

// Parameters of sizes that shard boundaries cut through, random values and gradients.
std::vector<Param> random_params(std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<Param> params;
  const std::int64_t sizes[] = {7, 1, 13, 4, 9};
  for (std::size_t i = 0; i < std::size(sizes); ++i) {
    Param p;
    p.name = "p" + std::to_string(i);
    p.value = Tensor::zeros({sizes[i]});
    p.grad = Tensor::zeros({sizes[i]});
    for (float& x : p.value.f32_span()) x = normal(rng);
    p.decay = i % 2 == 0;
    params.push_back(std::move(p));
  }
  return params;
}

void fill_gradients(std::vector<Param>& params, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  for (Param& p : params)
    for (float& g : p.grad.f32_span()) g = normal(rng);
}

bool same_values(const std::vector<Param>& a, const std::vector<Param>& b) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(a[i].value.raw(), b[i].value.raw(), a[i].value.bytes()) != 0) return false;
  return true;
}

// The all-gather: every replica takes each range from the replica that owns it.
void gather(std::vector<std::vector<Param>>& replicas) {
  const int ranks = static_cast<int>(replicas.size());
  const std::int64_t total = flat_size(replicas.front());
  for (int owner = 0; owner < ranks; ++owner) {
    const ElementRange shard = replica_shard(total, owner, ranks);
    std::int64_t offset = 0;
    for (std::size_t i = 0; i < replicas[owner].size(); ++i) {
      const std::int64_t n = replicas[owner][i].value.numel();
      const ElementRange mine = local_overlap(shard, offset, n);
      for (int r = 0; r < ranks; ++r)
        if (r != owner && mine.size() > 0)
          std::memcpy(replicas[r][i].value.f32() + mine.begin,
                      replicas[owner][i].value.f32() + mine.begin, sizeof(float) * mine.size());
      offset += n;
    }
  }
}

TEST_CASE("AdamW on 3 shards then an all-gather gives the bits of AdamW on the whole") {
  const AdamWConfig config{0.9f, 0.95f, 1e-8f, 0.1f};
  constexpr int kRanks = 3;
  std::vector<Param> whole = random_params(7);
  AdamWState whole_state;
  std::vector<std::vector<Param>> replicas;
  std::vector<AdamWState> states(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    replicas.push_back(random_params(7));
    states[r].shard = replica_shard(flat_size(replicas[r]), r, kRanks);
  }
  for (std::uint32_t step = 0; step < 4; ++step) {
    CAPTURE(step);
    fill_gradients(whole, 100 + step);
    adamw_step(whole, whole_state, config, 0.01f, 0.75f);
    for (int r = 0; r < kRanks; ++r) {
      fill_gradients(replicas[r], 100 + step);
      adamw_step(replicas[r], states[r], config, 0.01f, 0.75f);
    }
    // Before the gather each replica has updated its own range only.
    CHECK_FALSE(same_values(replicas[0], whole));
    gather(replicas);
    for (int r = 0; r < kRanks; ++r) CHECK(same_values(replicas[r], whole));
  }
  // Each replica keeps about a third of the moments.
  std::int64_t kept = 0;
  for (const AdamWState& s : states)
    for (const Tensor& m : s.m) kept += m.numel();
  CHECK(kept == flat_size(whole));
  CHECK(states[1].t == 4);
}

TEST_CASE("sharded optimizer state: captures add up to the whole, restores cut to the shard") {
  const AdamWConfig config{0.9f, 0.95f, 1e-8f, 0.1f};
  constexpr int kRanks = 2;
  std::vector<Param> whole = random_params(11);
  AdamWState whole_state;
  fill_gradients(whole, 5);
  adamw_step(whole, whole_state, config, 0.01f, 1.0f);
  const auto whole_capture = capture_param_state(whole, whole_state);

  // Restored into sharded states, captured again: the moments add up to the whole's.
  std::vector<std::vector<NamedTensor>> captures;
  std::vector<std::vector<Param>> replicas;
  std::vector<AdamWState> states(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    replicas.push_back(random_params(99));  // other values: the restore must overwrite them
    states[r].shard = replica_shard(flat_size(replicas[r]), r, kRanks);
    restore_param_state(whole_capture, replicas[r], states[r], 1);
    CHECK(same_values(replicas[r], whole));
    captures.push_back(capture_param_state(replicas[r], states[r]));
  }
  REQUIRE(captures[0].size() == whole_capture.size());
  for (std::size_t t = 0; t < whole_capture.size(); ++t) {
    CAPTURE(whole_capture[t].name);
    const Tensor& w = whole_capture[t].tensor;
    const bool moment = whole_capture[t].name.rfind("opt.", 0) == 0;
    for (std::int64_t k = 0; k < w.numel(); ++k) {
      const float a = captures[0][t].tensor.f32()[k], b = captures[1][t].tensor.f32()[k];
      if (moment) {
        CHECK(a + b == w.f32()[k]);  // one of the two is the value, the other zero
        CHECK((a == 0.0f || b == 0.0f));
      } else {
        CHECK(a == w.f32()[k]);
      }
    }
  }
  // And the sharded replicas step on exactly as the whole does.
  fill_gradients(whole, 6);
  adamw_step(whole, whole_state, config, 0.01f, 1.0f);
  for (int r = 0; r < kRanks; ++r) {
    fill_gradients(replicas[r], 6);
    adamw_step(replicas[r], states[r], config, 0.01f, 1.0f);
  }
  gather(replicas);
  CHECK(same_values(replicas[0], whole));
  CHECK(same_values(replicas[1], whole));
}

}  // namespace
}  // namespace conveyor
