#pragma once
// Causal multi-head self-attention over a fused QKV activation on the device
// (kernels/cpu/attention.hpp), flash-style: scores are formed tile by tile with an online
// softmax and never stored, so memory is O(T) per head, not O(T^2).
// qkv row layout: [q (C) | k (C) | v (C)], head h owns columns [h*hs, (h+1)*hs) of each;
// scale 1 / sqrt(hs). bf16 inputs and outputs, fp32 accumulation.
// Invariant: activations and the input gradient are written with = (every element of dqkv
// is written); no parameters.
// REQUIRES: head size hs = C / NH is 64 or 128.
//
// Backward is three kernels and uses no atomics: (1) delta = rowsum(dout * out);
// (2) one block per tile of keys computes dK and dV over every later query;
// (3) one block per tile of queries computes dQ over every earlier key. The probabilities
// are recomputed from the forward's logsumexp.
#include "kernels/cuda/types.hpp"

namespace conveyor {

void attention_forward(bf16* out,        // (B, T, C)
                       float* lse,       // (B, NH, T) logsumexp of each row's scaled scores
                       const bf16* qkv,  // (B, T, 3C)
                       int B, int T, int C, int NH, cudaStream_t stream);

void attention_backward_input(bf16* dqkv,         // (B, T, 3C) =
                              const bf16* dout,   // (B, T, C)
                              const bf16* qkv,    // (B, T, 3C)
                              const bf16* out,    // (B, T, C) from attention_forward
                              const float* lse,   // (B, NH, T) from attention_forward
                              int B, int T, int C, int NH, cudaStream_t stream);

}  // namespace conveyor
