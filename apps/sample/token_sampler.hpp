#pragma once
// The next token from a row of logits: greedy (temperature 0: the largest logit, the
// lowest id among equal ones), or a draw from softmax(logits / temperature) restricted to
// the top_k largest (top_k 0: all). Draws come from a 64-bit Mersenne Twister seeded with
// `seed`, turned into uniforms by hand (53 random bits), and the softmax is taken in double
// in id order, so the same seed and logits give the same tokens on every machine built from
// this code.
#include <cstdint>
#include <random>

namespace conveyor {

struct SamplingSettings {
  double temperature = 1.0;  // 0: greedy
  std::int64_t top_k = 0;    // 0: every token
  std::uint64_t seed = 0;
};

class TokenSampler {
 public:
  explicit TokenSampler(const SamplingSettings& s) : s_(s), rng_(s.seed) {}
  /// REQUIRES: V >= 1; temperature >= 0; top_k >= 0.
  std::int32_t next(const float* logits, std::int64_t V);

 private:
  SamplingSettings s_;
  std::mt19937_64 rng_;
};

}  // namespace conveyor
