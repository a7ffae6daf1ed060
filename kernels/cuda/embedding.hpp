#pragma once
// Token + learned position embedding on the device (kernels/cpu/embedding.hpp):
// out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :], added in fp32, stored as bf16; with wpe
// null (Llama: no position embedding) out[b, t, :] = wte[tokens[b, t], :], and a null dwpe
// skips its gradient.
// Invariant: parameter gradients (fp32, or bf16: optim.grad_dtype, summed in fp32 and
// rounded once per element) are accumulated with +=; activations are
// written with =. The backward is weight-only (the input is token ids).
// REQUIRES: every token in [0, V) and T <= the rows of wpe (the caller validates).
#include "kernels/cuda/types.hpp"

namespace conveyor {

void embedding_forward(bf16* out,                   // (B, T, C)
                       const std::int32_t* tokens,  // (B, T)
                       const bf16* wte,             // (V, C)
                       const bf16* wpe,             // (maxT, C) or null
                       int B, int T, int C, cudaStream_t stream);

/// Deterministic without atomics: the (token, position) pairs are sorted by token with a
/// stable radix sort, then one block per distinct token sums its rows of dout in
/// position order (the CPU's order) and adds the sum to dwte once. dwpe sums over b in
/// order. Scratch comes from the caching allocator on `stream`.
void embedding_backward_weight(float* dwte,                // (V, C)     +=
                               float* dwpe,                // (maxT, C)  +=
                               const bf16* dout,           // (B, T, C)
                               const std::int32_t* tokens, // (B, T)
                               int B, int T, int C, int V, cudaStream_t stream);
void embedding_backward_weight(bf16* dwte,                 // (V, C)     +=
                               bf16* dwpe,                 // (maxT, C)  +=
                               const bf16* dout,           // (B, T, C)
                               const std::int32_t* tokens, // (B, T)
                               int B, int T, int C, int V, cudaStream_t stream);

}  // namespace conveyor
