#pragma once
// SwiGLU, the gated activation of Llama's MLP: out = silu(gate) * up, silu(g) = g * sigmoid(g).
// Layout: one fused activation whose row n is [gate (F) | up (F)], i.e. the output of one
// linear layer whose weight is gate_proj's rows stacked on top of up_proj's rows (in that
// order); out row n is (F). Transformers' LlamaMLP computes
// down_proj(silu(gate_proj(x)) * up_proj(x)), which this gives with that stacked weight.
// Invariant: activations and the input gradient are written with = (every element of
// dgate_up is written); no parameters. out must not alias gate_up, nor dgate_up dout.
// The exponentials of each block run in SIMD for float (vector_math.hpp), as in gelu.hpp.
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/vector_math.hpp"

namespace conveyor::cpu {
namespace swiglu_detail {

constexpr std::int64_t kBlock = 512;  // elements per step: the sigmoids on the stack

// s[i] = sigmoid(g[i]) = 1 / (1 + exp(-g[i])) for i < n <= kBlock. A very negative g gives
// exp(-g) = inf and s = 0, the limit.
template <class Real>
void sigmoid_of(Real* s, const Real* g, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) s[i] = -g[i];
  exp_in_place(s, n);
  for (std::int64_t i = 0; i < n; ++i) s[i] = Real(1) / (Real(1) + s[i]);
}

}  // namespace swiglu_detail

template <class Real>
void swiglu_forward(Real* out,            // (N, F)
                    const Real* gate_up,  // (N, 2F) rows [gate (F) | up (F)]
                    std::int64_t N, std::int64_t F) {
  using namespace swiglu_detail;
  alignas(64) Real s[kBlock];
  for (std::int64_t n = 0; n < N; ++n) {
    const Real* g = gate_up + n * 2 * F;  // (F)
    const Real* u = g + F;                // (F)
    Real* y = out + n * F;                // (F)
    for (std::int64_t at = 0; at < F; at += kBlock) {
      const std::int64_t m = std::min(kBlock, F - at);
      sigmoid_of(s, g + at, m);
      for (std::int64_t i = 0; i < m; ++i) y[at + i] = (g[at + i] * s[i]) * u[at + i];
    }
  }
}

template <class Real>
void swiglu_backward_input(Real* dgate_up,       // (N, 2F) =, rows [dgate (F) | dup (F)]
                           const Real* dout,     // (N, F)
                           const Real* gate_up,  // (N, 2F)
                           std::int64_t N, std::int64_t F) {
  using namespace swiglu_detail;
  alignas(64) Real s[kBlock];
  for (std::int64_t n = 0; n < N; ++n) {
    const Real* g = gate_up + n * 2 * F;  // (F)
    const Real* u = g + F;                // (F)
    const Real* dy = dout + n * F;        // (F)
    Real* dg = dgate_up + n * 2 * F;      // (F)
    Real* du = dg + F;                    // (F)
    for (std::int64_t at = 0; at < F; at += kBlock) {
      const std::int64_t m = std::min(kBlock, F - at);
      sigmoid_of(s, g + at, m);
      for (std::int64_t i = 0; i < m; ++i) {
        const Real x = g[at + i], sig = s[i];
        // silu'(g) = sigmoid(g) (1 + g (1 - sigmoid(g)))
        dg[at + i] = dy[at + i] * u[at + i] * (sig * (Real(1) + x * (Real(1) - sig)));
        du[at + i] = dy[at + i] * (x * sig);
      }
    }
  }
}

}  // namespace conveyor::cpu
