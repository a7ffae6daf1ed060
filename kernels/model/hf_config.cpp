#include "kernels/model/hf_config.hpp"

#include <cmath>
#include <limits>

#include "kernels/common/error.hpp"

namespace conveyor {
namespace {

using json = nlohmann::json;

class Reader {
 public:
  Reader(const json& j, std::string where) : j_(j), where_(std::move(where)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw InputError(where_ + ": " + key + ": " + what);
  }

  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }

  std::int64_t positive_int(const char* key) const {
    if (!has(key)) throw InputError(where_ + ": has no " + std::string(key));
    return positive_int_of(j_[key], key);
  }
  std::int64_t positive_int_or(const char* key, std::int64_t fallback) const {
    return has(key) ? positive_int_of(j_[key], key) : fallback;
  }
  std::int64_t positive_int_of(const json& v, const std::string& key) const {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 1) fail(key, "expected a positive integer, got " + v.dump());
    return v.get<std::int64_t>();
  }
  double positive_number_of(const json& v, const std::string& key) const {
    if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
      fail(key, "expected a positive number, got " + v.dump());
    return v.get<double>();
  }
  double positive_number_or(const char* key, double fallback) const {
    return has(key) ? positive_number_of(j_[key], key) : fallback;
  }
  bool boolean_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_boolean()) fail(key, "expected true or false, got " + j_[key].dump());
    return j_[key].get<bool>();
  }
  std::string string_or(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_string()) fail(key, "expected a string, got " + j_[key].dump());
    return j_[key].get<std::string>();
  }
  const json& at(const char* key) const { return j_[key]; }

 private:
  const json& j_;
  std::string where_;
};

// The architecture: "architectures" (one name), else "model_type".
std::string architecture_of(const json& config, const std::string& where) {
  if (config.contains("architectures") && !config["architectures"].is_null()) {
    const json& a = config["architectures"];
    if (!a.is_array() || a.size() != 1 || !a[0].is_string())
      throw InputError(where + ": architectures: expected one name, got " + a.dump() + " (conveyor imports " +
                       hf_known_architectures() + ")");
    return a[0].get<std::string>();
  }
  if (config.contains("model_type") && config["model_type"].is_string()) {
    const std::string t = config["model_type"].get<std::string>();
    if (t == "llama") return "LlamaForCausalLM";
    if (t == "gpt2") return "GPT2LMHeadModel";
    throw InputError(where + ": model_type \"" + t + "\" is not supported (conveyor imports " +
                     hf_known_architectures() + ")");
  }
  throw InputError(where + ": has neither architectures nor model_type");
}

std::int64_t capped(std::int64_t max_positions, std::int64_t cap) {
  return cap > 0 && cap < max_positions ? cap : max_positions;
}

void parse_llama_rope(const Reader& r, const std::string& where, GptConfig& m) {
  // transformers 5 keeps theta and the scaling in rope_parameters; 4 has rope_theta at the
  // top and rope_scaling (null for none).
  const char* key = r.has("rope_parameters") ? "rope_parameters" : "rope_scaling";
  m.rope_theta = r.positive_number_or("rope_theta", 10000.0);
  if (!r.has(key)) return;
  const json& s = r.at(key);
  if (!s.is_object()) r.fail(key, "expected an object, got " + s.dump());
  const Reader sr(s, where);
  auto sub = [&](const char* k) { return std::string(key) + "." + k; };
  if (sr.has("rope_theta")) m.rope_theta = r.positive_number_of(s["rope_theta"], sub("rope_theta"));
  const char* type_key = sr.has("rope_type") ? "rope_type" : "type";
  const std::string type = sr.string_or(type_key, "default");
  if (type == "default") return;
  if (type != "llama3")
    r.fail(sub(type_key), "\"" + type + "\" is not supported (conveyor has default and llama3)");
  m.rope_scaling = RopeScaling::llama3;
  auto number = [&](const char* k) {
    if (!sr.has(k)) r.fail(sub(k), "missing (llama3 scaling needs factor, low_freq_factor, high_freq_factor and "
                                   "original_max_position_embeddings)");
    return r.positive_number_of(s[k], sub(k));
  };
  m.rope_scaling_factor = number("factor");
  m.rope_low_freq_factor = number("low_freq_factor");
  m.rope_high_freq_factor = number("high_freq_factor");
  if (!sr.has("original_max_position_embeddings"))
    number("original_max_position_embeddings");  // names it as missing
  m.rope_original_max_position = r.positive_int_of(s["original_max_position_embeddings"],
                                                   sub("original_max_position_embeddings"));
}

HfModelConfig parse_llama(const json& config, const std::string& where, std::int64_t cap) {
  const Reader r(config, where);
  HfModelConfig out;
  out.architecture = "LlamaForCausalLM";
  GptConfig& m = out.model;
  m.arch = ModelArch::llama;
  m.d_model = r.positive_int("hidden_size");
  m.layers = r.positive_int("num_hidden_layers");
  m.heads = r.positive_int("num_attention_heads");
  m.kv_heads = r.positive_int_or("num_key_value_heads", m.heads);
  m.ffn_dim = r.positive_int("intermediate_size");
  m.vocab = r.positive_int("vocab_size");
  out.max_positions = r.positive_int("max_position_embeddings");
  m.seq_len = capped(out.max_positions, cap);
  m.norm_eps = r.positive_number_or("rms_norm_eps", 1e-6);  // LlamaConfig's default
  m.tie_embeddings = r.boolean_or("tie_word_embeddings", false);
  parse_llama_rope(r, where, m);
  if (m.d_model % m.heads != 0)
    r.fail("num_attention_heads", std::to_string(m.heads) + " does not divide hidden_size " + std::to_string(m.d_model));
  if (r.has("head_dim") && r.positive_int("head_dim") != m.d_model / m.heads)
    r.fail("head_dim", std::to_string(r.positive_int("head_dim")) + " is not hidden_size / num_attention_heads = " +
                           std::to_string(m.d_model / m.heads) + " (conveyor's heads span the residual width)");
  const std::string act = r.string_or("hidden_act", "silu");
  if (act != "silu") r.fail("hidden_act", "\"" + act + "\" is not supported (conveyor's SwiGLU uses silu)");
  if (r.boolean_or("attention_bias", false)) r.fail("attention_bias", "true is not supported (conveyor's Llama has no biases)");
  if (r.boolean_or("mlp_bias", false)) r.fail("mlp_bias", "true is not supported (conveyor's Llama has no biases)");
  return out;
}

HfModelConfig parse_gpt2(const json& config, const std::string& where, std::int64_t cap) {
  const Reader r(config, where);
  HfModelConfig out;
  out.architecture = "GPT2LMHeadModel";
  GptConfig& m = out.model;
  m.arch = ModelArch::gpt2;
  m.d_model = r.positive_int("n_embd");
  m.layers = r.positive_int("n_layer");
  m.heads = r.positive_int("n_head");
  m.vocab = r.positive_int("vocab_size");
  out.max_positions = r.positive_int("n_positions");
  m.seq_len = capped(out.max_positions, cap);
  m.tie_embeddings = r.boolean_or("tie_word_embeddings", true);  // GPT2Config's default
  if (m.d_model % m.heads != 0)
    r.fail("n_head", std::to_string(m.heads) + " does not divide n_embd " + std::to_string(m.d_model));
  if (r.has("n_inner") && r.positive_int("n_inner") != 4 * m.d_model)
    r.fail("n_inner", std::to_string(r.positive_int("n_inner")) + " is not 4 n_embd = " + std::to_string(4 * m.d_model) +
                          " (conveyor's GPT-2 MLP is 4 d_model wide)");
  const std::string act = r.string_or("activation_function", "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    r.fail("activation_function",
           "\"" + act + "\" is not supported (conveyor's GELU is the tanh form: gelu_new or gelu_pytorch_tanh)");
  const double eps = r.positive_number_or("layer_norm_epsilon", 1e-5);
  if (eps != 1e-5)
    r.fail("layer_norm_epsilon", std::to_string(eps) + " is not supported (conveyor's GPT-2 LayerNorm uses 1e-5)");
  if (r.boolean_or("scale_attn_by_inverse_layer_idx", false))
    r.fail("scale_attn_by_inverse_layer_idx", "true is not supported");
  if (!r.boolean_or("scale_attn_weights", true)) r.fail("scale_attn_weights", "false is not supported");
  if (r.boolean_or("add_cross_attention", false)) r.fail("add_cross_attention", "true is not supported");
  return out;
}

nlohmann::ordered_json llama_config_json(const GptConfig& m) {
  nlohmann::ordered_json rope_scaling = nullptr;  // transformers 4's "no scaling"
  if (m.rope_scaling == RopeScaling::llama3)
    rope_scaling = {{"rope_type", "llama3"},
                    {"factor", m.rope_scaling_factor},
                    {"low_freq_factor", m.rope_low_freq_factor},
                    {"high_freq_factor", m.rope_high_freq_factor},
                    {"original_max_position_embeddings", m.rope_original_max_position}};
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"hidden_size", m.d_model},
          {"intermediate_size", m.llama_ffn_dim()},
          {"num_hidden_layers", m.layers},
          {"num_attention_heads", m.heads},
          {"num_key_value_heads", m.kv_head_count()},
          {"head_dim", m.head_dim()},
          {"hidden_act", "silu"},
          {"max_position_embeddings", m.seq_len},
          {"rms_norm_eps", m.norm_eps},
          {"rope_theta", m.rope_theta},
          {"rope_scaling", rope_scaling},
          {"vocab_size", m.vocab},
          {"tie_word_embeddings", m.tie_embeddings},
          {"attention_bias", false},
          {"mlp_bias", false}};
}

nlohmann::ordered_json gpt2_config_json(const GptConfig& m) {
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"n_embd", m.d_model},
          {"n_layer", m.layers},
          {"n_head", m.heads},
          {"n_inner", nullptr},  // 4 n_embd, conveyor's MLP width
          {"n_positions", m.seq_len},
          {"n_ctx", m.seq_len},
          {"vocab_size", m.vocab},
          {"layer_norm_epsilon", 1e-5},
          {"activation_function", "gelu_new"},
          {"tie_word_embeddings", m.tie_embeddings}};
}

}  // namespace

nlohmann::ordered_json hf_config_json(const GptConfig& model, const std::string& torch_dtype) {
  auto out = model.arch == ModelArch::llama ? llama_config_json(model) : gpt2_config_json(model);
  out["torch_dtype"] = torch_dtype;
  return out;
}

const char* hf_known_architectures() { return "LlamaForCausalLM, GPT2LMHeadModel"; }

HfModelConfig parse_hf_config(const nlohmann::json& config, const std::string& where, std::int64_t seq_len_cap) {
  if (!config.is_object()) throw InputError(where + ": not a JSON object");
  const std::string arch = architecture_of(config, where);
  if (arch == "LlamaForCausalLM") return parse_llama(config, where, seq_len_cap);
  if (arch == "GPT2LMHeadModel") return parse_gpt2(config, where, seq_len_cap);
  throw InputError(where + ": architectures: \"" + arch + "\" is not supported (conveyor imports " +
                   hf_known_architectures() + ")");
}

}  // namespace conveyor
