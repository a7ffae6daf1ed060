#pragma once
// Token + learned position embedding: out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :]
// (GPT-2), and the token embedding alone: out[b, t, :] = wte[tokens[b, t], :] (Llama, whose
// positions are rotary, inside attention).
// Invariant: parameter gradients are accumulated with +=; activations are written with =.
// The embedding has no input gradient (its input is token ids); its backward is weight-only
// and visits tokens in (b, t) order, so the accumulation order is fixed.
// REQUIRES: every token in [0, V) and T <= the rows of wpe (the caller validates).
#include <cstdint>

namespace conveyor::cpu {

template <class Real>
void embedding_forward(Real* out,                   // (B, T, C)
                       const std::int32_t* tokens,  // (B, T)
                       const Real* wte,             // (V, C)
                       const Real* wpe,             // (maxT, C)
                       std::int64_t B, std::int64_t T, std::int64_t C) {
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t t = 0; t < T; ++t) {
      Real* out_bt = out + (b * T + t) * C;                            // (C)
      const Real* wte_ix = wte + std::int64_t{tokens[b * T + t]} * C;  // (C)
      const Real* wpe_t = wpe + t * C;                                 // (C)
      for (std::int64_t i = 0; i < C; ++i) out_bt[i] = wte_ix[i] + wpe_t[i];
    }
  }
}

template <class Real>
void embedding_backward_weight(Real* dwte,                  // (V, C)     +=
                               Real* dwpe,                  // (maxT, C)  +=
                               const Real* dout,            // (B, T, C)
                               const std::int32_t* tokens,  // (B, T)
                               std::int64_t B, std::int64_t T, std::int64_t C) {
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t t = 0; t < T; ++t) {
      const Real* dout_bt = dout + (b * T + t) * C;                // (C)
      Real* dwte_ix = dwte + std::int64_t{tokens[b * T + t]} * C;  // (C)
      Real* dwpe_t = dwpe + t * C;                                 // (C)
      for (std::int64_t i = 0; i < C; ++i) {
        dwte_ix[i] += dout_bt[i];
        dwpe_t[i] += dout_bt[i];
      }
    }
  }
}

template <class Real>
void token_embedding_forward(Real* out,                   // (B, T, C)
                             const std::int32_t* tokens,  // (B, T)
                             const Real* wte,             // (V, C)
                             std::int64_t B, std::int64_t T, std::int64_t C) {
  for (std::int64_t bt = 0; bt < B * T; ++bt) {
    Real* out_bt = out + bt * C;                                 // (C)
    const Real* wte_ix = wte + std::int64_t{tokens[bt]} * C;     // (C)
    for (std::int64_t i = 0; i < C; ++i) out_bt[i] = wte_ix[i];
  }
}

template <class Real>
void token_embedding_backward_weight(Real* dwte,                  // (V, C) +=
                                     const Real* dout,            // (B, T, C)
                                     const std::int32_t* tokens,  // (B, T)
                                     std::int64_t B, std::int64_t T, std::int64_t C) {
  for (std::int64_t bt = 0; bt < B * T; ++bt) {
    const Real* dout_bt = dout + bt * C;                 // (C)
    Real* dwte_ix = dwte + std::int64_t{tokens[bt]} * C;  // (C)
    for (std::int64_t i = 0; i < C; ++i) dwte_ix[i] += dout_bt[i];
  }
}

}  // namespace conveyor::cpu
