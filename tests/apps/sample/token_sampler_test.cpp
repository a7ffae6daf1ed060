// TokenSampler: greedy is the argmax; a seed fixes the draws; top-k draws only among the k
// largest; the draws follow softmax(logits / temperature) (counted over many draws, on fresh
// random logits).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "apps/sample/token_sampler.hpp"

using namespace conveyor;

namespace {

std::vector<float> random_logits(std::mt19937_64& rng, std::size_t V) {
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> l(V);
  for (float& x : l) x = d(rng);
  return l;
}

std::vector<std::int32_t> draws(const SamplingSettings& s, const std::vector<float>& logits, int n) {
  TokenSampler sampler(s);
  std::vector<std::int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(sampler.next(logits.data(), static_cast<std::int64_t>(logits.size())));
  return out;
}

}  // namespace

TEST_CASE("temperature 0 draws the largest logit, and top-k 1 does too") {
  std::mt19937_64 rng(std::random_device{}());
  for (int round = 0; round < 20; ++round) {
    const auto logits = random_logits(rng, 1 + rng() % 300);
    const auto argmax = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    CHECK(draws({0.0, 0, rng()}, logits, 3) == std::vector<std::int32_t>(3, argmax));
    CHECK(draws({1.5, 1, rng()}, logits, 3) == std::vector<std::int32_t>(3, argmax));
  }
}

TEST_CASE("the same seed draws the same tokens, another seed others") {
  std::mt19937_64 rng(std::random_device{}());
  const auto logits = random_logits(rng, 256);
  const std::uint64_t seed = rng();
  const auto a = draws({1.0, 0, seed}, logits, 64);
  CHECK(draws({1.0, 0, seed}, logits, 64) == a);
  CHECK(draws({1.0, 0, seed + 1}, logits, 64) != a);
}

TEST_CASE("top-k draws only among the k largest logits") {
  std::mt19937_64 rng(std::random_device{}());
  const auto logits = random_logits(rng, 100);
  std::vector<std::int32_t> order(logits.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int32_t>(i);
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return logits[a] > logits[b]; });
  const std::vector<std::int32_t> top(order.begin(), order.begin() + 5);
  std::vector<int> seen(logits.size(), 0);
  for (std::int32_t id : draws({3.0, 5, rng()}, logits, 2000)) ++seen[static_cast<std::size_t>(id)];
  int inside = 0;
  for (std::int32_t id : top) inside += seen[static_cast<std::size_t>(id)] > 0;
  CHECK(inside == 5);  // at temperature 3 each of the five is drawn in 2000 draws
  for (std::size_t id = 0; id < logits.size(); ++id)
    if (std::find(top.begin(), top.end(), static_cast<std::int32_t>(id)) == top.end()) CHECK(seen[id] == 0);
}

TEST_CASE("draws follow softmax(logits / temperature)") {
  std::mt19937_64 rng(std::random_device{}());
  const std::vector<float> logits = random_logits(rng, 6);
  const double T = 0.7;
  const int n = 40000;
  std::vector<double> p(logits.size());
  double z = 0;
  for (std::size_t i = 0; i < p.size(); ++i) z += p[i] = std::exp(logits[i] / T);
  std::vector<int> seen(logits.size(), 0);
  for (std::int32_t id : draws({T, 0, rng()}, logits, n)) ++seen[static_cast<std::size_t>(id)];
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double expected = n * p[i] / z;
    CAPTURE(i);
    // 5 standard deviations of a binomial count, plus one for rounding.
    CHECK(std::abs(seen[i] - expected) <= 5 * std::sqrt(expected * (1 - p[i] / z)) + 1);
  }
}
