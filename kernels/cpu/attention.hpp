#pragma once
// Causal multi-head self-attention over a fused QKV activation, scale 1 / sqrt(head_dim).
// qkv row layout: [q (C) | k (C) | v (C)], head h owns columns [h*hs, (h+1)*hs) of each.
// Invariant: activations and the input gradient are written with = (every element of
// dqkv is written); no parameters, so the whole backward is an input gradient.
// Per (batch, head) the scores are one GEMM over all T x T pairs (O(T^2), fine on the
// CPU at these sizes); the masked upper triangle is then overwritten, and att holds exact
// zeros there so that att @ v only sees the past.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/vector_math.hpp"

namespace conveyor::cpu {

template <class Real>
void attention_forward(Real* out,        // (B, T, C)
                       Real* att,        // (B, NH, T, T) probabilities, 0 above the diagonal
                       const Real* qkv,  // (B, T, 3C)
                       std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH) {
  const std::int64_t hs = C / NH;
  const Real scale = Real(1) / std::sqrt(static_cast<Real>(hs));
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < NH; ++h) {
      const Real* q = qkv + b * T * 3 * C + h * hs;  // (T, hs), row stride 3C
      const Real* k = q + C;                         // (T, hs), row stride 3C
      const Real* v = q + 2 * C;                     // (T, hs), row stride 3C
      Real* a = att + (b * NH + h) * T * T;          // (T, T)
      Real* o = out + b * T * C + h * hs;            // (T, hs), row stride C
      gemm(false, true, T, T, hs, scale, q, 3 * C, k, 3 * C, Real(0), a, T);
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
      gemm(false, false, T, hs, T, Real(1), a, T, v, 3 * C, Real(0), o, C);
    }
  }
}

template <class Real>
void attention_backward_input(Real* dqkv,        // (B, T, 3C) =
                              const Real* dout,  // (B, T, C)
                              const Real* qkv,   // (B, T, 3C)
                              const Real* att,   // (B, NH, T, T)
                              std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH) {
  const std::int64_t hs = C / NH;
  const Real scale = Real(1) / std::sqrt(static_cast<Real>(hs));
  std::vector<Real> datt(static_cast<std::size_t>(T * T));  // (T, T) scratch, per head
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < NH; ++h) {
      const Real* q = qkv + b * T * 3 * C + h * hs;  // (T, hs), row stride 3C
      const Real* k = q + C;
      const Real* v = q + 2 * C;
      Real* dq = dqkv + b * T * 3 * C + h * hs;  // (T, hs), row stride 3C
      Real* dk = dq + C;
      Real* dv = dq + 2 * C;
      const Real* a = att + (b * NH + h) * T * T;  // (T, T)
      const Real* dy = dout + b * T * C + h * hs;  // (T, hs), row stride C
      Real* d = datt.data();                       // (T, T)
      // out = att @ v
      gemm(false, true, T, T, hs, Real(1), dy, C, v, 3 * C, Real(0), d, T);
      gemm(true, false, T, hs, T, Real(1), a, T, dy, C, Real(0), dv, 3 * C);
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
      gemm(false, false, T, hs, T, Real(1), d, T, k, 3 * C, Real(0), dq, 3 * C);
      gemm(true, false, T, hs, T, Real(1), d, T, q, 3 * C, Real(0), dk, 3 * C);
    }
  }
}

}  // namespace conveyor::cpu
