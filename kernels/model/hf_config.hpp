#pragma once
// A Hugging Face config.json as conveyor's model (GptConfig), for the two architectures
// conveyor has:
//   LlamaForCausalLM   hidden_size -> d_model, num_hidden_layers -> layers,
//                      num_attention_heads -> heads, num_key_value_heads -> kv_heads,
//                      intermediate_size -> ffn_dim, vocab_size -> vocab,
//                      max_position_embeddings -> seq_len, rms_norm_eps -> norm_eps,
//                      tie_word_embeddings -> tie_embeddings, rope_theta and rope_scaling
//                      (transformers 4) or rope_parameters (transformers 5) -> rope_theta,
//                      rope_scaling (none, or llama3 and its four numbers)
//   GPT2LMHeadModel    n_embd, n_layer, n_head, n_positions, vocab_size, tie_word_embeddings
// Whatever would make the model compute something conveyor's does not is refused, naming
// the key and its value: another architecture or rope scaling type, an activation other
// than SiLU (Llama) or GELU's tanh form (GPT-2), biases in a Llama, GPT-2's n_inner other
// than 4 n_embd or layer_norm_epsilon other than conveyor's fixed 1e-5, a head_dim other
// than hidden_size / num_attention_heads.
// seq_len: the model's maximum positions, or `seq_len_cap` when smaller (> 0): a Llama's
// positions are rotary (no weights), a GPT-2's wpe rows past the cap are dropped.
// hf_config_json is the way back: a config.json that parse_hf_config reads as the same
// GptConfig (seq_len as the maximum positions), holding every key transformers' config
// class of the architecture reads for the model's shape, so nothing falls to a default
// that would compute something else.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "kernels/model/gpt_config.hpp"

namespace conveyor {

struct HfModelConfig {
  std::string architecture;  // "LlamaForCausalLM" or "GPT2LMHeadModel"
  GptConfig model;
  std::int64_t max_positions = 0;  // max_position_embeddings / n_positions, before the cap
};

/// Throws InputError naming `where` (config.json's path) and the key.
HfModelConfig parse_hf_config(const nlohmann::json& config, const std::string& where,
                              std::int64_t seq_len_cap = 0);

/// config.json for `model` (its arch decides the architecture), with "torch_dtype"
/// `torch_dtype` ("float32" or "bfloat16": the dtype of the weights beside it).
nlohmann::ordered_json hf_config_json(const GptConfig& model, const std::string& torch_dtype);

/// The architectures parse_hf_config knows, for messages.
const char* hf_known_architectures();

}  // namespace conveyor
