#pragma once
// Softmax cross-entropy fused with the LM head's output (kernels/cpu/cross_entropy.hpp):
// one block per row reads the bf16 logits, forms max and sum in fp32, writes the row's
// loss and, in the same launch, dlogits = (softmax - onehot(target)) * dloss over the
// logits (in place allowed). No probability matrix is stored.
// Invariant: activations and the input gradient are written with =; no parameters.
// REQUIRES: every target in [0, V) (the caller validates).
#include "kernels/cuda/types.hpp"

namespace conveyor {

/// losses[n] = logsumexp(logits[n]) - logits[n, target[n]]. With dlogits non-null also
/// dlogits = (softmax(logits) - onehot(target)) * dloss; dlogits may equal logits.
/// dloss is d(total loss)/d(loss of one row): loss_scale / N for a mean over N rows.
void cross_entropy_forward_backward(float* losses,                // (N)
                                    bf16* dlogits,                // (N, V) =, or null
                                    const bf16* logits,           // (N, V)
                                    const std::int32_t* targets,  // (N)
                                    float dloss, int N, int V, cudaStream_t stream);

/// *mean = sum(losses) / N, one block in a fixed order (deterministic). `mean` is device
/// memory (one float).
void mean_loss(float* mean, const float* losses, int N, cudaStream_t stream);

}  // namespace conveyor
