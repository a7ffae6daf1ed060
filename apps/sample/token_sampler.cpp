#include "apps/sample/token_sampler.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace conveyor {

std::int32_t TokenSampler::next(const float* logits, std::int64_t V) {
  if (s_.temperature == 0.0) return static_cast<std::int32_t>(std::max_element(logits, logits + V) - logits);
  // The candidates: every id, or the top_k largest (ties to the lower id), kept in id order.
  std::vector<std::int32_t> ids(static_cast<std::size_t>(V));
  std::iota(ids.begin(), ids.end(), 0);
  if (s_.top_k > 0 && s_.top_k < V) {
    const auto k = static_cast<std::ptrdiff_t>(s_.top_k);
    std::nth_element(ids.begin(), ids.begin() + k - 1, ids.end(), [&](std::int32_t a, std::int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    ids.resize(static_cast<std::size_t>(k));
    std::sort(ids.begin(), ids.end());
  }
  double max = -INFINITY;
  for (std::int32_t id : ids) max = std::max(max, static_cast<double>(logits[id]));
  std::vector<double> weights(ids.size());
  double sum = 0;
  for (std::size_t i = 0; i < ids.size(); ++i)
    sum += weights[i] = std::exp((static_cast<double>(logits[ids[i]]) - max) / s_.temperature);
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * sum;  // [0, sum)
  double acc = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    acc += weights[i];
    if (u < acc) return ids[i];
  }
  return ids.back();  // u within rounding of sum
}

}  // namespace conveyor
