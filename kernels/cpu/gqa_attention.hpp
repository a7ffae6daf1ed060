#pragma once
// Causal grouped-query self-attention (Llama 2 70B, Llama 3) over a fused QKV activation,
// scale 1 / sqrt(hs), hs = C / NH.
// qkv row layout: [q (NH*hs) | k (NKV*hs) | v (NKV*hs)], row width W = (NH + 2 NKV) hs.
// Query head h owns columns [h*hs, (h+1)*hs) of q and reads kv head h / (NH / NKV) of k and v
// (transformers' repeat_kv: the NH / NKV query heads of a group are consecutive).
// out (B, T, C) with C = NH*hs, head h in columns [h*hs, (h+1)*hs).
// Invariant: activations and the input gradient are written with = (every element of dqkv
// is written); no parameters, so the whole backward is an input gradient. dk and dv of a kv
// head are the sums over the query heads of its group, taken in increasing h: the first
// head's GEMM writes them (beta 0), the later ones add to them (beta 1).
// With NKV == NH this is GPT-2's multi-head attention (attention.hpp calls it so).
// REQUIRES: C % NH == 0; NH % NKV == 0.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/vector_math.hpp"

namespace conveyor::cpu {

template <class Real>
void gqa_attention_forward(Real* out,        // (B, T, C)
                           Real* att,        // (B, NH, T, T) probabilities, 0 above the diagonal
                           const Real* qkv,  // (B, T, (NH + 2 NKV) hs)
                           std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                           std::int64_t NKV) {
  const std::int64_t hs = C / NH;
  const std::int64_t group = NH / NKV;
  const std::int64_t kv = NKV * hs;  // width of the k part and of the v part
  const std::int64_t W = C + 2 * kv;
  const Real scale = Real(1) / std::sqrt(static_cast<Real>(hs));
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < NH; ++h) {
      const std::int64_t g = h / group;
      const Real* q = qkv + b * T * W + h * hs;      // (T, hs), row stride W
      const Real* k = qkv + b * T * W + C + g * hs;  // (T, hs), row stride W
      const Real* v = k + kv;                        // (T, hs), row stride W
      Real* a = att + (b * NH + h) * T * T;          // (T, T)
      Real* o = out + b * T * C + h * hs;            // (T, hs), row stride C
      gemm(false, true, T, T, hs, scale, q, W, k, W, Real(0), a, T);
      for (std::int64_t i = 0; i < T; ++i) {
        Real* row = a + i * T;  // (T)
        Real mx = row[0];
        for (std::int64_t j = 1; j <= i; ++j) mx = std::max(mx, row[j]);
        for (std::int64_t j = 0; j <= i; ++j) row[j] -= mx;
        exp_in_place(row, i + 1);
        Real sum = 0;
        for (std::int64_t j = 0; j <= i; ++j) sum += row[j];
        const Real inv = Real(1) / sum;
        for (std::int64_t j = 0; j <= i; ++j) row[j] *= inv;
        for (std::int64_t j = i + 1; j < T; ++j) row[j] = 0;
      }
      gemm(false, false, T, hs, T, Real(1), a, T, v, W, Real(0), o, C);
    }
  }
}

template <class Real>
void gqa_attention_backward_input(Real* dqkv,        // (B, T, (NH + 2 NKV) hs) =
                                  const Real* dout,  // (B, T, C)
                                  const Real* qkv,   // (B, T, (NH + 2 NKV) hs)
                                  const Real* att,   // (B, NH, T, T)
                                  std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                                  std::int64_t NKV) {
  const std::int64_t hs = C / NH;
  const std::int64_t group = NH / NKV;
  const std::int64_t kv = NKV * hs;
  const std::int64_t W = C + 2 * kv;
  const Real scale = Real(1) / std::sqrt(static_cast<Real>(hs));
  std::vector<Real> datt(static_cast<std::size_t>(T * T));  // (T, T) scratch, per head
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < NH; ++h) {
      const std::int64_t g = h / group;
      // The group's first head writes dk and dv; the others add to them.
      const Real beta_kv = (h % group == 0) ? Real(0) : Real(1);
      const Real* q = qkv + b * T * W + h * hs;  // (T, hs), row stride W
      const Real* k = qkv + b * T * W + C + g * hs;
      const Real* v = k + kv;
      Real* dq = dqkv + b * T * W + h * hs;  // (T, hs), row stride W
      Real* dk = dqkv + b * T * W + C + g * hs;
      Real* dv = dk + kv;
      const Real* a = att + (b * NH + h) * T * T;  // (T, T)
      const Real* dy = dout + b * T * C + h * hs;  // (T, hs), row stride C
      Real* d = datt.data();                       // (T, T)
      // out = att @ v
      gemm(false, true, T, T, hs, Real(1), dy, C, v, W, Real(0), d, T);
      gemm(true, false, T, hs, T, Real(1), a, T, dy, C, beta_kv, dv, W);
      // softmax backward, scaled: d becomes the gradient of the scaled-out scores
      for (std::int64_t i = 0; i < T; ++i) {
        const Real* ar = a + i * T;
        Real* dr = d + i * T;
        Real dot = 0;
        for (std::int64_t j = 0; j <= i; ++j) dot += ar[j] * dr[j];
        for (std::int64_t j = 0; j <= i; ++j) dr[j] = ar[j] * (dr[j] - dot) * scale;
        for (std::int64_t j = i + 1; j < T; ++j) dr[j] = 0;
      }
      // scores = q @ k^T
      gemm(false, false, T, hs, T, Real(1), d, T, k, W, Real(0), dq, W);
      gemm(true, false, T, hs, T, Real(1), d, T, q, W, beta_kv, dk, W);
    }
  }
}

}  // namespace conveyor::cpu
