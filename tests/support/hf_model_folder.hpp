#pragma once
// Small Hugging Face model folders written by the tests themselves, as transformers'
// save_pretrained lays them out: config.json, then model.safetensors or shards
// model-0000k-of-0000n.safetensors with model.safetensors.index.json. Values are random
// from a fixed seed and exactly representable in the stored dtype (F32, BF16 or F16), so
// an importer's f32 must equal them bit for bit.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/tensor/bf16.hpp"
#include "kernels/tensor/f16.hpp"

namespace conveyor::testing {

struct HfTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> values;  // exact in the folder's dtype
};

/// The f16 bits of a value f16 holds exactly (the tests draw only such values).
inline std::uint16_t exact_f16_bits(float v) {
  static const std::map<float, std::uint16_t> bits = [] {
    std::map<float, std::uint16_t> m;
    for (std::uint32_t b = 0; b < 0x7c00u; ++b)  // the non-negative finite halves; -0 below
      m.emplace(f16_bits_to_float(static_cast<std::uint16_t>(b)), static_cast<std::uint16_t>(b));
    return m;
  }();
  const auto it = bits.find(v < 0 ? -v : v);
  if (it == bits.end()) throw std::invalid_argument("not an f16 value");
  return static_cast<std::uint16_t>(it->second | (std::signbit(v) ? 0x8000u : 0u));
}

/// Normal(0, 0.5) values rounded to `dtype`: F32 as drawn, BF16 rounded to nearest, F16
/// as multiples of 2^-8 in (-4, 4) (exact in f16, whose spacing there is 2^-9 at most).
inline std::vector<float> random_values(std::mt19937& rng, std::size_t n, const std::string& dtype) {
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::vector<float> out(n);
  for (auto& v : out) {
    v = normal(rng);
    if (dtype == "BF16") v = round_to_bf16(v);
    if (dtype == "F16") v = static_cast<float>(static_cast<int>(std::max(-3.99f, std::min(3.99f, v)) * 256)) / 256;
  }
  return out;
}

inline HfTensor random_tensor(std::mt19937& rng, std::string name, std::vector<std::int64_t> shape,
                              const std::string& dtype) {
  std::size_t n = 1;
  for (auto d : shape) n *= static_cast<std::size_t>(d);
  return {std::move(name), std::move(shape), random_values(rng, n, dtype)};
}

/// One safetensors file of `tensors` stored as `dtype`, written by hand (the format's
/// header, then the bytes in order) so the test does not lean on the reader's writer.
inline void write_hf_safetensors(const std::string& path, const std::vector<HfTensor>& tensors,
                                 const std::string& dtype) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::string data;
  for (const auto& t : tensors) {
    const std::size_t begin = data.size();
    for (float v : t.values) {
      if (dtype == "F32") {
        data.append(reinterpret_cast<const char*>(&v), 4);
      } else {
        const std::uint16_t b = dtype == "BF16" ? float_to_bf16_bits(v) : exact_f16_bits(v);
        data.append(reinterpret_cast<const char*>(&b), 2);
      }
    }
    header[t.name] = {{"dtype", dtype}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const std::uint64_t n = text.size();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << text << data;
  if (!out) throw std::runtime_error("cannot write " + path);
}

inline void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

inline std::string read_file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// config.json and the tensors, in one model.safetensors (shards == 1) or split round
/// robin over `shards` files with an index.
inline void write_hf_folder(const std::filesystem::path& dir, const nlohmann::json& config,
                            const std::vector<HfTensor>& tensors, const std::string& dtype, int shards = 1) {
  std::filesystem::create_directories(dir);
  write_text_file((dir / "config.json").string(), config.dump(2));
  if (shards == 1) {
    write_hf_safetensors((dir / "model.safetensors").string(), tensors, dtype);
    return;
  }
  std::vector<std::vector<HfTensor>> parts(static_cast<std::size_t>(shards));
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::size_t k = i % parts.size();
    parts[k].push_back(tensors[i]);
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05d.safetensors", k + 1, shards);
    index["weight_map"][tensors[i].name] = name;
  }
  for (std::size_t k = 0; k < parts.size(); ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05d.safetensors", k + 1, shards);
    write_hf_safetensors((dir / name).string(), parts[k], dtype);
  }
  write_text_file((dir / "model.safetensors.index.json").string(), index.dump(2));
}

/// A small LlamaForCausalLM config.json (transformers 4 style: rope_theta at the top).
inline nlohmann::json small_llama_config(int layers = 2, int d_model = 32, int heads = 4, int kv_heads = 2,
                                         int ffn = 48, int vocab = 260, bool tied = false) {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"hidden_size", d_model},
          {"num_hidden_layers", layers},
          {"num_attention_heads", heads},
          {"num_key_value_heads", kv_heads},
          {"intermediate_size", ffn},
          {"vocab_size", vocab},
          {"max_position_embeddings", 64},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0},
          {"rope_scaling", nullptr},
          {"hidden_act", "silu"},
          {"attention_bias", false},
          {"mlp_bias", false},
          {"tie_word_embeddings", tied},
          {"torch_dtype", "float32"}};
}

/// Every tensor of LlamaForCausalLM for `config`, random, in transformers' order.
inline std::vector<HfTensor> llama_tensors(const nlohmann::json& c, const std::string& dtype, unsigned seed) {
  std::mt19937 rng(seed);
  const std::int64_t C = c["hidden_size"], L = c["num_hidden_layers"], NH = c["num_attention_heads"],
                     NKV = c["num_key_value_heads"], F = c["intermediate_size"], V = c["vocab_size"];
  const std::int64_t kv = NKV * (C / NH);
  std::vector<HfTensor> out;
  out.push_back(random_tensor(rng, "model.embed_tokens.weight", {V, C}, dtype));
  for (std::int64_t b = 0; b < L; ++b) {
    const std::string p = "model.layers." + std::to_string(b) + ".";
    out.push_back(random_tensor(rng, p + "input_layernorm.weight", {C}, dtype));
    out.push_back(random_tensor(rng, p + "self_attn.q_proj.weight", {C, C}, dtype));
    out.push_back(random_tensor(rng, p + "self_attn.k_proj.weight", {kv, C}, dtype));
    out.push_back(random_tensor(rng, p + "self_attn.v_proj.weight", {kv, C}, dtype));
    out.push_back(random_tensor(rng, p + "self_attn.o_proj.weight", {C, C}, dtype));
    out.push_back(random_tensor(rng, p + "post_attention_layernorm.weight", {C}, dtype));
    out.push_back(random_tensor(rng, p + "mlp.gate_proj.weight", {F, C}, dtype));
    out.push_back(random_tensor(rng, p + "mlp.up_proj.weight", {F, C}, dtype));
    out.push_back(random_tensor(rng, p + "mlp.down_proj.weight", {C, F}, dtype));
  }
  out.push_back(random_tensor(rng, "model.norm.weight", {C}, dtype));
  if (!c.value("tie_word_embeddings", false)) out.push_back(random_tensor(rng, "lm_head.weight", {V, C}, dtype));
  return out;
}

/// A small GPT2LMHeadModel config.json.
inline nlohmann::json small_gpt2_config(int layers = 2, int d_model = 32, int heads = 4, int vocab = 260,
                                        int positions = 64) {
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"n_embd", d_model},
          {"n_layer", layers},
          {"n_head", heads},
          {"n_positions", positions},
          {"n_ctx", positions},
          {"vocab_size", vocab},
          {"n_inner", nullptr},
          {"activation_function", "gelu_new"},
          {"layer_norm_epsilon", 1e-5},
          {"tie_word_embeddings", true}};
}

/// Every tensor of GPT2LMHeadModel for `config` (Conv1D weights (in, out)), random, under
/// `prefix`; with `buffers`, the attention masks older transformers saved.
inline std::vector<HfTensor> gpt2_tensors(const nlohmann::json& c, const std::string& dtype, unsigned seed,
                                          const std::string& prefix = "transformer.", bool buffers = false) {
  std::mt19937 rng(seed);
  const std::int64_t C = c["n_embd"], L = c["n_layer"], V = c["vocab_size"], P = c["n_positions"];
  std::vector<HfTensor> out;
  out.push_back(random_tensor(rng, prefix + "wte.weight", {V, C}, dtype));
  out.push_back(random_tensor(rng, prefix + "wpe.weight", {P, C}, dtype));
  for (std::int64_t b = 0; b < L; ++b) {
    const std::string p = prefix + "h." + std::to_string(b) + ".";
    out.push_back(random_tensor(rng, p + "ln_1.weight", {C}, dtype));
    out.push_back(random_tensor(rng, p + "ln_1.bias", {C}, dtype));
    out.push_back(random_tensor(rng, p + "attn.c_attn.weight", {C, 3 * C}, dtype));
    out.push_back(random_tensor(rng, p + "attn.c_attn.bias", {3 * C}, dtype));
    out.push_back(random_tensor(rng, p + "attn.c_proj.weight", {C, C}, dtype));
    out.push_back(random_tensor(rng, p + "attn.c_proj.bias", {C}, dtype));
    out.push_back(random_tensor(rng, p + "ln_2.weight", {C}, dtype));
    out.push_back(random_tensor(rng, p + "ln_2.bias", {C}, dtype));
    out.push_back(random_tensor(rng, p + "mlp.c_fc.weight", {C, 4 * C}, dtype));
    out.push_back(random_tensor(rng, p + "mlp.c_fc.bias", {4 * C}, dtype));
    out.push_back(random_tensor(rng, p + "mlp.c_proj.weight", {4 * C, C}, dtype));
    out.push_back(random_tensor(rng, p + "mlp.c_proj.bias", {C}, dtype));
    if (buffers) {
      out.push_back(random_tensor(rng, p + "attn.bias", {1, 1, P, P}, dtype));
      out.push_back(random_tensor(rng, p + "attn.masked_bias", {}, dtype));
    }
  }
  out.push_back(random_tensor(rng, prefix + "ln_f.weight", {C}, dtype));
  out.push_back(random_tensor(rng, prefix + "ln_f.bias", {C}, dtype));
  return out;
}

/// The tensor `name` of `tensors`.
inline const HfTensor& hf_tensor(const std::vector<HfTensor>& tensors, const std::string& name) {
  for (const auto& t : tensors)
    if (t.name == name) return t;
  throw std::invalid_argument("no tensor " + name);
}

}  // namespace conveyor::testing
