#pragma once
// AdamW over one flat parameter buffer in a single launch (kernels/optim/adamw.hpp):
//   g = grad * grad_scale * clip;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   w -= lr * ((m / bc1) / (sqrt(v / bc2) + eps) + wd * w)
// bc1, bc2 are 1 - beta^t, computed on the host in double (adamw_bias_corrections) as the
// CPU optimizer does. clip comes from an optional device-side squared gradient norm
// (grad_norm.hpp), so clipping needs no host round trip:
//   clip = (max_norm > 0 && sqrt(norm_sq) > max_norm) ? max_norm / (sqrt(norm_sq) + 1e-6) : 1
// Weight decay applies per element according to a table of runs over the flat buffer.
// Invariant: parameters and moments are updated in place; gradients are only read.
// Element-wise: deterministic.
#include "kernels/cuda/types.hpp"

namespace conveyor {

struct AdamWHyper {
  float lr = 0.0f;
  float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
  float bias_correction1 = 1.0f, bias_correction2 = 1.0f;  // 1 - beta^t
  float grad_scale = 1.0f;                // e.g. 1 / accumulation steps, or a fixed clip
  const float* grad_norm_sq = nullptr;    // device, one float, or null: no clipping
  float max_grad_norm = 0.0f;             // used with grad_norm_sq
};

/// Runs of the flat buffer with and without weight decay. Device arrays of `count`
/// entries: run i covers [ends[i-1], ends[i]) (ends[-1] = 0) and gets weight decay when
/// decay[i] != 0. count == 0: every element gets weight decay.
/// REQUIRES: ends ascending, ends[count-1] >= n.
struct DecayRuns {
  const std::int64_t* ends = nullptr;
  const std::uint8_t* decay = nullptr;
  int count = 0;
};

/// (1 - beta1^t, 1 - beta2^t) in double, rounded to float, for step t >= 1.
void adamw_bias_corrections(AdamWHyper& hyper, std::int64_t t);

/// fp32 master weights and moments; `compute` (bf16 copy of the new weights) may be null.
/// Gradients fp32, or bf16 (optim.grad_dtype bf16: widened exactly, the maths unchanged).
void adamw_update(float* master,        // (n) updated
                  bf16* compute,        // (n) = bf16(master), or null
                  const float* grads,   // (n)
                  float* m, float* v,   // (n) updated
                  std::int64_t n, const AdamWHyper& hyper, const DecayRuns& runs,
                  cudaStream_t stream);
void adamw_update(float* master, bf16* compute,
                  const bf16* grads,    // (n)
                  float* m, float* v, std::int64_t n, const AdamWHyper& hyper,
                  const DecayRuns& runs, cudaStream_t stream);

/// All-bf16 state (weights and moments bf16, maths in fp32, round to nearest even), as in
/// the PyTorch reference that keeps no fp32 master copy. Gradients fp32, or bf16 as above.
void adamw_update_bf16(bf16* params,         // (n) updated
                       const float* grads,   // (n)
                       bf16* m, bf16* v,     // (n) updated
                       std::int64_t n, const AdamWHyper& hyper, const DecayRuns& runs,
                       cudaStream_t stream);
void adamw_update_bf16(bf16* params,
                       const bf16* grads,    // (n)
                       bf16* m, bf16* v, std::int64_t n, const AdamWHyper& hyper,
                       const DecayRuns& runs, cudaStream_t stream);

}  // namespace conveyor
