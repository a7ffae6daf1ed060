#pragma once
// Causal multi-head self-attention over a fused QKV activation, scale 1 / sqrt(head_dim).
// qkv row layout: [q (C) | k (C) | v (C)], head h owns columns [h*hs, (h+1)*hs) of each.
// Invariant: activations and the input gradient are written with = (every element of
// dqkv is written); no parameters, so the whole backward is an input gradient.
// It is grouped-query attention with as many kv heads as query heads: one implementation
// (gqa_attention.hpp) serves both, so GPT-2's attention and Llama's cannot drift apart.
#include <cstdint>

#include "kernels/cpu/gqa_attention.hpp"

namespace conveyor::cpu {

template <class Real>
void attention_forward(Real* out,        // (B, T, C)
                       Real* att,        // (B, NH, T, T) probabilities, 0 above the diagonal
                       const Real* qkv,  // (B, T, 3C)
                       std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH) {
  gqa_attention_forward(out, att, qkv, B, T, C, NH, NH);
}

template <class Real>
void attention_backward_input(Real* dqkv,        // (B, T, 3C) =
                              const Real* dout,  // (B, T, C)
                              const Real* qkv,   // (B, T, 3C)
                              const Real* att,   // (B, NH, T, T)
                              std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH) {
  gqa_attention_backward_input(dqkv, dout, qkv, att, B, T, C, NH, NH);
}

}  // namespace conveyor::cpu
