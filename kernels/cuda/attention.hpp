#pragma once
// Causal self-attention over a fused QKV activation on the device, grouped-query
// (kernels/cpu/gqa_attention.hpp) with multi-head as its NKV = NH case
// (kernels/cpu/attention.hpp), flash-style: scores are formed tile by tile with an online
// softmax and never stored, so memory is O(T) per head, not O(T^2).
// qkv row layout: [q (C) | k (NKV hs) | v (NKV hs)], hs = C / NH: query head h owns columns
// [h*hs, (h+1)*hs) of q and reads kv head h / (NH / NKV) of k and v; with NKV = NH the row
// is [q (C) | k (C) | v (C)]. Scale 1 / sqrt(hs). bf16 inputs and outputs, fp32
// accumulation. dK and dV of a kv head sum over its group of query heads in a fixed order.
// Invariant: activations and the input gradient are written with = (every element of dqkv
// is written); no parameters.
// REQUIRES: head size hs = C / NH is 64 or 128; NH a multiple of NKV.
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

/// Grouped-query attention: NKV kv heads shared by NH query heads.
void gqa_attention_forward(bf16* out,        // (B, T, C)
                           float* lse,       // (B, NH, T) logsumexp of each row's scaled scores
                           const bf16* qkv,  // (B, T, C + 2 NKV hs)
                           int B, int T, int C, int NH, int NKV, cudaStream_t stream);

void gqa_attention_backward_input(bf16* dqkv,         // (B, T, C + 2 NKV hs) =
                                  const bf16* dout,   // (B, T, C)
                                  const bf16* qkv,    // (B, T, C + 2 NKV hs)
                                  const bf16* out,    // (B, T, C) from gqa_attention_forward
                                  const float* lse,   // (B, NH, T) from gqa_attention_forward
                                  int B, int T, int C, int NH, int NKV, cudaStream_t stream);

/// Multi-head attention (GPT-2's): gqa_attention_forward with NKV = NH.
inline void attention_forward(bf16* out,        // (B, T, C)
                              float* lse,       // (B, NH, T)
                              const bf16* qkv,  // (B, T, 3C)
                              int B, int T, int C, int NH, cudaStream_t stream) {
  gqa_attention_forward(out, lse, qkv, B, T, C, NH, NH, stream);
}

inline void attention_backward_input(bf16* dqkv,         // (B, T, 3C) =
                                     const bf16* dout,   // (B, T, C)
                                     const bf16* qkv,    // (B, T, 3C)
                                     const bf16* out,    // (B, T, C) from attention_forward
                                     const float* lse,   // (B, NH, T) from attention_forward
                                     int B, int T, int C, int NH, cudaStream_t stream) {
  gqa_attention_backward_input(dqkv, dout, qkv, out, lse, B, T, C, NH, NH, stream);
}

}  // namespace conveyor
