// A Hugging Face folder as conveyor's parameters: every parameter equals the expected
// transform of the folder's tensors (q, k, v stacked by rows; gate then up; GPT-2's Conv1D
// transposed; tied heads from the embedding; wpe's first rows), names and shapes are
// stage_param_layout's, config.json's keys land in GptConfig, and every bad input names
// what is wrong.
#include <doctest/doctest.h>

#include "kernels/common/error.hpp"
#include "kernels/model/hf_config.hpp"
#include "kernels/model/hf_weights.hpp"
#include "kernels/model/param_layout.hpp"
#include "tests/support/hf_model_folder.hpp"
#include "tests/support/temp_dir.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

const Tensor& param(const HfWeights& w, const std::string& name) {
  for (const auto& p : w.params)
    if (p.name == name) return p.tensor;
  throw std::invalid_argument("no parameter " + name);
}

// The rows of several tensors one after the other (what "stacked by rows" means).
std::vector<float> stacked(const std::vector<const HfTensor*>& parts) {
  std::vector<float> out;
  for (const auto* p : parts) out.insert(out.end(), p->values.begin(), p->values.end());
  return out;
}

// (in, out) -> (out, in).
std::vector<float> transposed(const HfTensor& t) {
  const auto in = static_cast<std::size_t>(t.shape[0]), outs = static_cast<std::size_t>(t.shape[1]);
  std::vector<float> out(t.values.size());
  for (std::size_t i = 0; i < in; ++i)
    for (std::size_t o = 0; o < outs; ++o) out[o * in + i] = t.values[i * outs + o];
  return out;
}

void check_equal(const Tensor& got, const std::vector<float>& want, const std::string& name) {
  INFO(name);
  REQUIRE(static_cast<std::size_t>(got.numel()) == want.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) bad += got.f32()[i] != want[i];
  CHECK(bad == 0);
}

void check_layout(const HfWeights& w) {
  StageSlice whole;
  whole.num_blocks = static_cast<int>(w.config.model.layers);
  whole.has_embedding = whole.has_head = true;
  const auto layout = stage_param_layout(w.config.model, whole);
  REQUIRE(layout.size() == w.params.size());
  for (std::size_t i = 0; i < layout.size(); ++i) {
    CHECK(w.params[i].name == layout[i].name);
    CHECK(w.params[i].tensor.shape() == layout[i].shape);
  }
}

std::string import_error(const fs::path& dir) {
  try {
    read_hf_weights(HfFolder(dir.string()));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("Llama with grouped-query attention: qkv is q, k, v stacked, gate_up is gate then up") {
  for (const bool tied : {false, true}) {
    INFO("tied " << tied);
    TempDir dir;
    const auto config = small_llama_config(2, 32, 4, 2, 48, 260, tied);
    const auto t = llama_tensors(config, tied ? "BF16" : "F32", 21);
    write_hf_folder(dir.path() / "m", config, t, tied ? "BF16" : "F32", tied ? 3 : 1);
    const HfWeights w = read_hf_weights(HfFolder(dir / "m"));
    const GptConfig& c = w.config.model;
    CHECK(w.config.architecture == "LlamaForCausalLM");
    CHECK(c.arch == ModelArch::llama);
    CHECK(c.layers == 2);
    CHECK(c.d_model == 32);
    CHECK(c.heads == 4);
    CHECK(c.kv_heads == 2);
    CHECK(c.ffn_dim == 48);
    CHECK(c.vocab == 260);
    CHECK(c.seq_len == 64);
    CHECK(c.tie_embeddings == tied);
    CHECK(c.norm_eps == 1e-5);
    check_layout(w);
    check_equal(param(w, "wte.weight"), hf_tensor(t, "model.embed_tokens.weight").values, "wte");
    for (int b = 0; b < 2; ++b) {
      const std::string L = "model.layers." + std::to_string(b) + ".", B = "blocks." + std::to_string(b) + ".";
      check_equal(param(w, B + "attn_norm.weight"), hf_tensor(t, L + "input_layernorm.weight").values, B + "attn_norm");
      check_equal(param(w, B + "attn.qkv.weight"),
                  stacked({&hf_tensor(t, L + "self_attn.q_proj.weight"), &hf_tensor(t, L + "self_attn.k_proj.weight"),
                           &hf_tensor(t, L + "self_attn.v_proj.weight")}),
                  B + "qkv");
      CHECK(param(w, B + "attn.qkv.weight").shape() == Shape({32 + 2 * 2 * 8, 32}));
      check_equal(param(w, B + "attn.o.weight"), hf_tensor(t, L + "self_attn.o_proj.weight").values, B + "o");
      check_equal(param(w, B + "mlp_norm.weight"), hf_tensor(t, L + "post_attention_layernorm.weight").values,
                  B + "mlp_norm");
      check_equal(param(w, B + "mlp.gate_up.weight"),
                  stacked({&hf_tensor(t, L + "mlp.gate_proj.weight"), &hf_tensor(t, L + "mlp.up_proj.weight")}),
                  B + "gate_up");
      check_equal(param(w, B + "mlp.down.weight"), hf_tensor(t, L + "mlp.down_proj.weight").values, B + "down");
    }
    check_equal(param(w, "norm_f.weight"), hf_tensor(t, "model.norm.weight").values, "norm_f");
    check_equal(param(w, "lm_head.weight"),
                hf_tensor(t, tied ? "model.embed_tokens.weight" : "lm_head.weight").values, "lm_head");
  }
}

TEST_CASE("GPT-2: Conv1D weights transposed, biases copied, the head tied, wpe cut to seq_len") {
  for (const std::string prefix : {"transformer.", ""}) {
    INFO("prefix '" << prefix << "'");
    TempDir dir;
    const auto config = small_gpt2_config();
    const auto t = gpt2_tensors(config, "F16", 5, prefix, /*buffers=*/prefix.empty());
    write_hf_folder(dir.path() / "m", config, t, "F16");
    const HfWeights w = read_hf_weights(HfFolder(dir / "m"), 16);
    const GptConfig& c = w.config.model;
    CHECK(c.arch == ModelArch::gpt2);
    CHECK(c.seq_len == 16);
    CHECK(w.config.max_positions == 64);
    CHECK(c.tie_embeddings);
    CHECK(w.prefix == prefix);
    CHECK(w.ignored.size() == (prefix.empty() ? 4u : 0u));  // attn.bias, attn.masked_bias of 2 blocks
    check_layout(w);
    check_equal(param(w, "wte.weight"), hf_tensor(t, prefix + "wte.weight").values, "wte");
    const auto& wpe = hf_tensor(t, prefix + "wpe.weight").values;
    check_equal(param(w, "wpe.weight"), std::vector<float>(wpe.begin(), wpe.begin() + 16 * 32), "wpe");
    for (int b = 0; b < 2; ++b) {
      const std::string H = prefix + "h." + std::to_string(b) + ".", B = "blocks." + std::to_string(b) + ".";
      check_equal(param(w, B + "ln1.weight"), hf_tensor(t, H + "ln_1.weight").values, B + "ln1.weight");
      check_equal(param(w, B + "ln1.bias"), hf_tensor(t, H + "ln_1.bias").values, B + "ln1.bias");
      check_equal(param(w, B + "attn.qkv.weight"), transposed(hf_tensor(t, H + "attn.c_attn.weight")), B + "qkv");
      check_equal(param(w, B + "attn.qkv.bias"), hf_tensor(t, H + "attn.c_attn.bias").values, B + "qkv.bias");
      check_equal(param(w, B + "attn.proj.weight"), transposed(hf_tensor(t, H + "attn.c_proj.weight")), B + "proj");
      check_equal(param(w, B + "attn.proj.bias"), hf_tensor(t, H + "attn.c_proj.bias").values, B + "proj.bias");
      check_equal(param(w, B + "ln2.weight"), hf_tensor(t, H + "ln_2.weight").values, B + "ln2.weight");
      check_equal(param(w, B + "ln2.bias"), hf_tensor(t, H + "ln_2.bias").values, B + "ln2.bias");
      check_equal(param(w, B + "mlp.fc1.weight"), transposed(hf_tensor(t, H + "mlp.c_fc.weight")), B + "fc1");
      check_equal(param(w, B + "mlp.fc1.bias"), hf_tensor(t, H + "mlp.c_fc.bias").values, B + "fc1.bias");
      check_equal(param(w, B + "mlp.fc2.weight"), transposed(hf_tensor(t, H + "mlp.c_proj.weight")), B + "fc2");
      check_equal(param(w, B + "mlp.fc2.bias"), hf_tensor(t, H + "mlp.c_proj.bias").values, B + "fc2.bias");
    }
    check_equal(param(w, "ln_f.weight"), hf_tensor(t, prefix + "ln_f.weight").values, "ln_f.weight");
    check_equal(param(w, "ln_f.bias"), hf_tensor(t, prefix + "ln_f.bias").values, "ln_f.bias");
    check_equal(param(w, "lm_head.weight"), hf_tensor(t, prefix + "wte.weight").values, "lm_head");
  }
}

TEST_CASE("config.json's rope settings, transformers 4 and 5 style, become model.rope_*") {
  auto c = small_llama_config();
  c["rope_theta"] = 500000.0;
  c["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 32.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  GptConfig m = parse_hf_config(c, "config.json").model;
  CHECK(m.rope_theta == 500000.0);
  CHECK(m.rope_scaling == RopeScaling::llama3);
  CHECK(m.rope_scaling_factor == 32.0);
  CHECK(m.rope_low_freq_factor == 1.0);
  CHECK(m.rope_high_freq_factor == 4.0);
  CHECK(m.rope_original_max_position == 8192);

  c.erase("rope_theta");
  c.erase("rope_scaling");
  c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 250000.0}};
  m = parse_hf_config(c, "config.json").model;
  CHECK(m.rope_theta == 250000.0);
  CHECK(m.rope_scaling == RopeScaling::none);

  c.erase("num_key_value_heads");  // multi-head: kv_heads = heads
  CHECK(parse_hf_config(c, "config.json").model.kv_heads == 4);
  CHECK(parse_hf_config(c, "config.json", 16).model.seq_len == 16);
  CHECK(parse_hf_config(c, "config.json", 1000).model.seq_len == 64);  // a cap above the maximum keeps it
}

TEST_CASE("bad configs name the key and the value") {
  auto error = [](const nlohmann::json& c) {
    try {
      parse_hf_config(c, "m/config.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  auto c = small_llama_config();
  c["architectures"] = {"MistralForCausalLM"};
  CHECK(contains(error(c), "m/config.json: architectures: \"MistralForCausalLM\" is not supported"));
  c = small_llama_config();
  c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  CHECK(contains(error(c), "rope_scaling.rope_type: \"yarn\" is not supported"));
  c["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  CHECK(contains(error(c), "rope_scaling.type: \"linear\" is not supported"));
  c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 4.0}};
  CHECK(contains(error(c), "rope_scaling.low_freq_factor: missing"));
  c = small_llama_config();
  c["hidden_act"] = "gelu";
  CHECK(contains(error(c), "hidden_act: \"gelu\" is not supported"));
  c = small_llama_config();
  c["attention_bias"] = true;
  CHECK(contains(error(c), "attention_bias: true is not supported"));
  c = small_llama_config();
  c["hidden_size"] = "wide";
  CHECK(contains(error(c), "hidden_size: expected a positive integer, got \"wide\""));
  c.erase("hidden_size");
  CHECK(contains(error(c), "has no hidden_size"));
  auto g = small_gpt2_config();
  g["layer_norm_epsilon"] = 1e-6;
  CHECK(contains(error(g), "layer_norm_epsilon"));
  g = small_gpt2_config();
  g["activation_function"] = "relu";
  CHECK(contains(error(g), "activation_function: \"relu\" is not supported"));
}

TEST_CASE("a missing, misshapen or unexpected tensor is named, all of them at once") {
  TempDir dir;
  const auto config = small_llama_config();
  auto t = llama_tensors(config, "F32", 9);
  std::erase_if(t, [](const HfTensor& x) { return x.name == "model.layers.1.mlp.up_proj.weight"; });
  for (auto& x : t)
    if (x.name == "model.layers.0.self_attn.k_proj.weight") {
      x.shape = {32, 32};  // as if kv_heads were heads
      x.values.resize(32 * 32);
    }
  t.push_back({"model.layers.0.self_attn.q_norm.weight", {8}, std::vector<float>(8, 1.0f)});
  write_hf_folder(dir.path() / "m", config, t, "F32");
  const std::string e = import_error(dir.path() / "m");
  CHECK(contains(e, "missing tensors: model.layers.1.mlp.up_proj.weight (for blocks.1.mlp.gate_up.weight)"));
  CHECK(contains(e, "shape mismatch: model.layers.0.self_attn.k_proj.weight is [32, 32], the config needs [16, 32]"));
  CHECK(contains(e, "tensors a LlamaForCausalLM has no place for: model.layers.0.self_attn.q_norm.weight"));

  // An untied Llama without its lm_head.weight.
  const auto untied = llama_tensors(config, "F32", 9);
  std::vector<HfTensor> no_head(untied.begin(), untied.end() - 1);
  write_hf_folder(dir.path() / "n", config, no_head, "F32");
  CHECK(contains(import_error(dir.path() / "n"), "missing tensors: lm_head.weight (for lm_head.weight)"));
}
