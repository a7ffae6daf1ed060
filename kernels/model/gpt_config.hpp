#pragma once
#include <cstdint>

#include "kernels/model/recompute.hpp"

namespace conveyor {

/// The shape of a GPT-2 style decoder (pre-norm blocks, learned positions, untied head).
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

  std::int64_t head_dim() const { return d_model / heads; }
  std::int64_t mlp_hidden() const { return 4 * d_model; }
};

}  // namespace conveyor
