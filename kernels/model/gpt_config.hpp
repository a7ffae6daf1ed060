#pragma once
#include <cstdint>

#include "kernels/model/model_arch.hpp"
#include "kernels/model/recompute.hpp"

namespace conveyor {

/// The shape of a decoder-only model: GPT-2 (pre-norm LayerNorm blocks, learned positions,
/// GELU MLP) by default, or Llama (model.arch; model_arch.hpp). The fields under "Llama
/// only" are never read for GPT-2: config validation refuses them set away from their
/// defaults there, so a GPT-2 model is the same whatever they hold.
struct GptConfig {
  std::int64_t layers = 4;
  std::int64_t d_model = 64;
  std::int64_t heads = 4;
  std::int64_t seq_len = 64;
  std::int64_t vocab = 256;
  /// model.tie_embeddings: the LM head's weight is the token embedding's (GPT-2's tying).
  /// The embedding stage and the head stage each keep a copy, initialised alike; their
  /// gradients are summed every step, so the copies stay bitwise equal.
  bool tie_embeddings = false;
  /// model.recompute: activations recomputed in backward instead of kept (recompute.hpp).
  /// Changes memory and time, never a bit of the results.
  Recompute recompute = Recompute::none;
  /// model.arch.
  ModelArch arch = ModelArch::gpt2;

  // Llama only.
  /// model.kv_heads: key/value heads of grouped-query attention; 0 means `heads`.
  std::int64_t kv_heads = 0;
  /// model.ffn_dim: the SwiGLU MLP's hidden width F; 0 means Meta's rule (llama_ffn_dim()).
  std::int64_t ffn_dim = 0;
  /// model.rope_theta: base of the rotary inverse frequencies theta^(-2i/D).
  double rope_theta = 10000.0;
  /// model.rope_scaling and, for llama3, its four numbers (Llama 3.1's config.json
  /// rope_scaling: factor, low_freq_factor, high_freq_factor,
  /// original_max_position_embeddings).
  RopeScaling rope_scaling = RopeScaling::none;
  double rope_scaling_factor = 8.0;
  double rope_low_freq_factor = 1.0;
  double rope_high_freq_factor = 4.0;
  std::int64_t rope_original_max_position = 8192;
  /// model.norm_eps: RMSNorm's epsilon.
  double norm_eps = 1e-5;

  std::int64_t head_dim() const { return d_model / heads; }
  /// GPT-2's MLP hidden width.
  std::int64_t mlp_hidden() const { return 4 * d_model; }
  /// Llama: the key/value heads (kv_heads, or heads when 0).
  std::int64_t kv_head_count() const { return kv_heads > 0 ? kv_heads : heads; }
  /// Llama: the SwiGLU hidden width: ffn_dim, or when 0 Meta's rule, 2/3 of 4 d_model
  /// rounded up to a multiple of 256 (11008 for Llama 2 7B's d_model 4096).
  std::int64_t llama_ffn_dim() const {
    if (ffn_dim > 0) return ffn_dim;
    const std::int64_t hidden = 2 * (4 * d_model) / 3;
    return (hidden + 255) / 256 * 256;
  }
};

}  // namespace conveyor
