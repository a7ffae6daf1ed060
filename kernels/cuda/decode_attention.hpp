#pragma once
// Causal grouped-query attention of n new query rows against a key/value cache on the
// device: the decode step of generation (kernels/cuda/model/cuda_kv_decoder.hpp), the GPU's
// kernels/cpu/cached_attention.hpp. The new rows sit at positions [pos, pos + n); the cache
// already holds their keys and values, so it holds positions [0, pos + n), and row i
// attends to positions [0, pos + i] — what a full causal forward (attention.hpp) lets
// position pos + i see, with the same scale 1 / sqrt(hs) and the same grouping (query head
// h reads kv head h / (NH / NKV)). One launch serves a prompt (n large) and a step (n = 1).
// bf16 inputs and output, fp32 scores, softmax and sums (an online softmax per warp over a
// fixed share of the positions, the warps merged in warp order: deterministic, no atomics,
// memory O(hs) per row and head whatever the length).
// Invariant: out is written with = (every element); nothing else is written.
// REQUIRES: C % NH == 0, hs = C / NH <= 256; NH % NKV == 0; pos >= 0, n >= 1.
#include <cstdint>

#include "kernels/cuda/types.hpp"

namespace conveyor {

void decode_attention_forward(bf16* out,             // (n, C), C = NH * hs
                              const bf16* q,         // (n, NH * hs), rows q_stride apart
                              std::int64_t q_stride,
                              const bf16* k_cache,   // (pos + n, NKV * hs)
                              const bf16* v_cache,   // (pos + n, NKV * hs)
                              int pos, int n, int C, int NH, int NKV, cudaStream_t stream);

}  // namespace conveyor
