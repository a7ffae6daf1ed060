#pragma once
// Whether some weights are the model of this run's config: every model.* key that
// changes what the weights mean, not only their shapes (tie_embeddings, heads and a
// Llama's rotary and norm settings change no tensor's shape, so the tensors alone would
// not show them). model.recompute changes no bit and may differ.
#include <string>
#include <vector>

#include "kernels/model/gpt_config.hpp"

namespace conveyor {

enum class SeqLenRule {
  same,       // --resume: the run continues the one that wrote the checkpoint
  fits_in,    // --init-from: a GPT-2's seq_len at most the weights' positions (wpe rows;
              // the first are kept), a Llama's any (its positions are rotary, no weights)
};

/// Each key that differs, as "model.KEY A (`label`) vs B (this run)"; none when they match.
std::vector<std::string> model_differences(const GptConfig& weights, const GptConfig& run, const std::string& label,
                                           SeqLenRule seq_len);

}  // namespace conveyor
