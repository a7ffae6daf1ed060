#pragma once
// The LM head and the loss, after an architecture's final norm (gpt2_layers.hpp,
// llama_layers.hpp): logits = xn lm_head^T (no bias), softmax cross-entropy, mean over the
// B*T tokens. One (B, T, V) buffer holds the logits, then the probabilities, then dlogits.
// Invariant: lm_head's gradient is accumulated with +=; activations and the gradient of
// xn are written with =.
#include <cstdint>

#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/linear.hpp"
#include "kernels/tensor/tensor.hpp"

namespace conveyor {

/// Returns the mean loss; `logits` (B, T, V) then holds the probabilities. `logits_out`,
/// when not null, receives a copy of the logits themselves (B, T, V), taken before the
/// softmax overwrites them: for checks against other implementations
/// (apps/hf/checkpoint_logits.hpp, `conveyor hf logits`); training passes null and pays nothing.
inline double lm_head_forward(Tensor& logits, const Tensor& xn, const Tensor& targets,
                              const float* lm_head, std::int64_t B, std::int64_t T, std::int64_t C,
                              std::int64_t V, Tensor* logits_out = nullptr) {
  const std::int64_t N = B * T;
  logits = Tensor::uninitialized({B, T, V});
  cpu::linear_forward<float>(logits.f32(), xn.f32(), lm_head, nullptr, N, C, V);
  if (logits_out) *logits_out = logits.clone();
  return cpu::cross_entropy_forward(logits.f32(), logits.f32(), targets.i32(), N, V);
}

/// Turns the probabilities in `logits` into dlogits (the loss scaled by loss_scale) and
/// returns the gradient of xn (B, T, C).
inline Tensor lm_head_backward_input(Tensor& logits, const Tensor& targets, const float* lm_head,
                                     float loss_scale, std::int64_t B, std::int64_t T,
                                     std::int64_t C, std::int64_t V) {
  const std::int64_t N = B * T;
  float* dlogits = logits.f32();  // (B, T, V), over the probabilities
  cpu::cross_entropy_backward_input(dlogits, dlogits, targets.i32(),
                                    loss_scale / static_cast<float>(N), N, V);
  Tensor d_xn = Tensor::uninitialized({B, T, C});
  cpu::linear_backward_input(d_xn.f32(), dlogits, lm_head, N, C, V);
  return d_xn;
}

inline void lm_head_backward_weight(float* d_lm_head, const Tensor& dlogits, const Tensor& xn,
                                    std::int64_t B, std::int64_t T, std::int64_t C,
                                    std::int64_t V) {
  cpu::linear_backward_weight<float>(d_lm_head, nullptr, dlogits.f32(), xn.f32(), B * T, C, V);
}

}  // namespace conveyor
