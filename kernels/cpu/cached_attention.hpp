#pragma once
// Causal grouped-query attention of n new query rows against a key/value cache: the decode
// step of generation (kernels/model/kv_decoder.hpp). The new rows sit at positions
// [pos, pos + n); the cache already holds their keys and values, so it holds positions
// [0, pos + n), and row i attends to positions [0, pos + i] — the same rows a full causal
// forward (gqa_attention.hpp) lets position pos + i see, with the same scale 1 / sqrt(hs)
// and the same query-head grouping (query head h reads kv head h / (NH / NKV)).
// Invariant: out is written with = (every element); nothing else is written.
// Scores, softmax and the weighted sum are accumulated in double and rounded once, so the
// result differs from the full forward's by float rounding only (the test states how much).
// REQUIRES: C % NH == 0; NH % NKV == 0; the cache holds at least pos + n rows.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace conveyor::cpu {

template <class Real>
void cached_attention_forward(Real* out,            // (n, C) C = NH * hs
                              const Real* q,        // (n, NH * hs), rows q_stride apart
                              std::int64_t q_stride,
                              const Real* k_cache,  // (pos + n, NKV * hs)
                              const Real* v_cache,  // (pos + n, NKV * hs)
                              std::int64_t pos, std::int64_t n, std::int64_t C, std::int64_t NH,
                              std::int64_t NKV) {
  const std::int64_t hs = C / NH;
  const std::int64_t group = NH / NKV;
  const std::int64_t kv = NKV * hs;  // a cache row's width
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  std::vector<double> scores(static_cast<std::size_t>(pos + n));  // (pos + n) scratch
  std::vector<double> acc(static_cast<std::size_t>(hs));          // (hs) scratch
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t last = pos + i;  // the newest position row i sees
    for (std::int64_t h = 0; h < NH; ++h) {
      const std::int64_t g = h / group;
      const Real* qh = q + i * q_stride + h * hs;  // (hs)
      double mx = -INFINITY;
      for (std::int64_t j = 0; j <= last; ++j) {
        const Real* kj = k_cache + j * kv + g * hs;  // (hs)
        double s = 0;
        for (std::int64_t d = 0; d < hs; ++d) s += static_cast<double>(qh[d]) * kj[d];
        scores[j] = s * scale;
        mx = std::max(mx, scores[j]);
      }
      double sum = 0;
      for (std::int64_t j = 0; j <= last; ++j) sum += (scores[j] = std::exp(scores[j] - mx));
      std::fill(acc.begin(), acc.end(), 0.0);
      for (std::int64_t j = 0; j <= last; ++j) {
        const Real* vj = v_cache + j * kv + g * hs;  // (hs)
        const double a = scores[j] / sum;
        for (std::int64_t d = 0; d < hs; ++d) acc[d] += a * vj[d];
      }
      Real* o = out + i * C + h * hs;  // (hs)
      for (std::int64_t d = 0; d < hs; ++d) o[d] = static_cast<Real>(acc[d]);
    }
  }
}

}  // namespace conveyor::cpu
