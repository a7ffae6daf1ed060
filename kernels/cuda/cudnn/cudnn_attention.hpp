#pragma once
// attention.hpp's causal attention through cuDNN's fused flash attention (sdpa_graphs.hpp):
// the same layouts, scale and natural-log logsumexp as conveyor's kernels, so one pass may
// run here and the other on the kernels. The backward is deterministic (no atomics); dqkv is
// written with =.
//
// Grouped-query attention (NKV < NH kv heads, attention.hpp's gqa_ row layout) runs as
// cudnn-frontend composes it: K and V with NKV heads, and in the backward dK and dV formed
// per query head and summed over each group by a reduction node.
// Plans are built on first use per (device, B, T, C, NH, NKV, pass) and kept for the process:
// building compiles kernels at run time (seconds), so it happens once per shape. A refusal
// (the shape, the head size, a missing cuDNN sub-library) is kept as well. One cuDNN handle
// per device, created on first use; handles and plans are never destroyed (they outlive
// static destruction, as the allocators do).
// Each call takes its workspace (and the backward's softmax_sum) from the device's caching
// allocator on its stream, and binds its pointers in a fresh variant pack.
//
// Thread-safety: every function may be called from several threads. A handle is used by
// one thread at a time (a mutex per device around plan builds and around cudnnSetStream +
// cudnnBackendExecute, since the handle's stream is shared state); builds on different
// devices run in parallel, and one (device, shape, pass) is built once.
#include <initializer_list>
#include <optional>
#include <string>

#include "kernels/cuda/types.hpp"

namespace conveyor {

enum class AttentionPass { forward, backward };

/// Whether every pointer is 16-byte aligned, as cuDNN's tensors declare them.
bool aligned_for_cudnn(std::initializer_list<const void*> pointers);

/// Why cuDNN cannot run `pass` at this shape on the current device (the error that building
/// its plan met, or that conveyor was built without cuDNN), or nullopt when it can. The first
/// call per (device, shape, pass) builds the plan. Never throws CudaError.
std::optional<std::string> cudnn_attention_refusal(AttentionPass pass, int B, int T, int C,
                                                   int NH, int NKV);

/// gqa_attention_forward's contract (attention.hpp), on the current device.
/// REQUIRES: cudnn_attention_refusal(forward, ...) is nullopt (CudaError naming the refusal
/// otherwise); every pointer 16-byte aligned (std::invalid_argument otherwise).
void cudnn_attention_forward(bf16* out,        // (B, T, C)
                             float* lse,       // (B, NH, T)
                             const bf16* qkv,  // (B, T, C + 2 NKV hs)
                             int B, int T, int C, int NH, int NKV, cudaStream_t stream);

/// gqa_attention_backward_input's contract (attention.hpp); REQUIRES as the forward, for
/// the backward pass.
void cudnn_attention_backward_input(bf16* dqkv,         // (B, T, C + 2 NKV hs) =
                                    const bf16* dout,   // (B, T, C)
                                    const bf16* qkv,    // (B, T, C + 2 NKV hs)
                                    const bf16* out,    // (B, T, C)
                                    const float* lse,   // (B, NH, T)
                                    int B, int T, int C, int NH, int NKV, cudaStream_t stream);

}  // namespace conveyor
