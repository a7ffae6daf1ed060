#pragma once
// conveyor's parameters as a Hugging Face model's tensors: the inverse of hf_weights.hpp,
// recipe by recipe (hf_names.hpp, split_hf_recipe), so that reading the result back gives
// every parameter bit for bit. Names are transformers' (prefix hf_default_prefix), f32:
// Llama's fused qkv and gate_up come apart into q/k/v_proj and gate/up_proj, GPT-2's
// Conv1D weights go back to (in, out), wpe keeps the model's seq_len rows. Tied models
// hold no lm_head.weight (transformers ties it to the embedding on load); conveyor's own
// head copy is bitwise the embedding (gpt_config.hpp) and is left out.
#include <vector>

#include "kernels/io/safetensors.hpp"
#include "kernels/model/gpt_config.hpp"

namespace conveyor {

/// Every tensor of the Hugging Face model of `model`, made from `params` (the whole
/// model's, in any order). Throws InputError naming each parameter missing or of another
/// shape (all of them in one message).
std::vector<NamedTensor> hf_export_tensors(const GptConfig& model, const std::vector<NamedTensor>& params);

}  // namespace conveyor
