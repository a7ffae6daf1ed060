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
// Two implementations, chosen per process by set_attention_backend:
// - cudnn (the default, runtime.attention: cudnn): cuDNN's fused flash attention
//   (kernels/cuda/cudnn/cudnn_attention.hpp), its deterministic backward; faster on the
//   H200 (`conveyor bench kernels`, cuDNN 9.14: forward 0.055 ms against 0.087 ms, backward
//   0.185 against 0.307 at B=4, NH=16, T=1024, hs=128).
// - kernels (runtime.attention: kernels): conveyor's own kernels (attention.cu). Backward is three
//   kernels and uses no atomics: (1) delta = rowsum(dout * out); (2) one block per tile of
//   keys computes dK and dV over every later query; (3) one block per tile of queries
//   computes dQ over every earlier key. The probabilities are recomputed from the
//   forward's logsumexp.
// Where cuDNN cannot run a pass at a shape (it refuses the shape, libcudnn's engines are
// missing, conveyor was built without cuDNN, a pointer is not 16-byte aligned), that pass
// runs on conveyor's kernels and one warning per shape goes to stderr with the reason. The
// two share the logsumexp's meaning, so a forward from one backend feeds a backward from the
// other. Each backend is deterministic, but the two round differently: their results are
// close, not bitwise equal. The REQUIRES above hold for both backends (checked before the
// choice), so the fallback is always possible.
#include "kernels/cuda/types.hpp"

namespace conveyor {

enum class AttentionBackend { cudnn, kernels };

/// Chooses the implementation of every later attention call in this process (any thread;
/// calls already queued are not affected). runtime.attention sets it for a run.
void set_attention_backend(AttentionBackend backend);
AttentionBackend attention_backend();

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
