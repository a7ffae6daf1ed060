// The way back to a Hugging Face model: config.json read back is the same model
// (hf_config_json), every recipe undone bit for bit (split_hf_recipe), and a folder read
// then exported gives its own tensors again, by transformers' names, with no lm_head.weight
// when the head is tied.
#include <doctest/doctest.h>

#include <random>
#include <set>

#include "kernels/common/error.hpp"
#include "kernels/model/hf_config.hpp"
#include "kernels/model/hf_export_tensors.hpp"
#include "kernels/model/hf_names.hpp"
#include "kernels/model/hf_weights.hpp"
#include "tests/support/hf_model_folder.hpp"
#include "tests/support/temp_dir.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

GptConfig llama3_model(bool tied) {
  GptConfig m;
  m.arch = ModelArch::llama;
  m.layers = 3;
  m.d_model = 32;
  m.heads = 4;
  m.kv_heads = 1;
  m.ffn_dim = 40;
  m.seq_len = 48;
  m.vocab = 300;
  m.tie_embeddings = tied;
  m.rope_theta = 500000.0;
  m.rope_scaling = RopeScaling::llama3;
  m.rope_scaling_factor = 32.0;
  m.rope_low_freq_factor = 1.5;
  m.rope_high_freq_factor = 4.0;
  m.rope_original_max_position = 8192;
  m.norm_eps = 1e-6;
  return m;
}

// Every field the Hugging Face config carries.
void check_same_model(const GptConfig& a, const GptConfig& b) {
  CHECK(a.arch == b.arch);
  CHECK(a.layers == b.layers);
  CHECK(a.d_model == b.d_model);
  CHECK(a.heads == b.heads);
  CHECK(a.seq_len == b.seq_len);
  CHECK(a.vocab == b.vocab);
  CHECK(a.tie_embeddings == b.tie_embeddings);
  if (a.arch != ModelArch::llama) return;
  CHECK(a.kv_head_count() == b.kv_head_count());
  CHECK(a.llama_ffn_dim() == b.llama_ffn_dim());
  CHECK(a.rope_theta == b.rope_theta);
  CHECK(a.norm_eps == b.norm_eps);
  CHECK(a.rope_scaling == b.rope_scaling);
  if (a.rope_scaling != RopeScaling::llama3) return;  // its four numbers are unused then
  CHECK(a.rope_scaling_factor == b.rope_scaling_factor);
  CHECK(a.rope_low_freq_factor == b.rope_low_freq_factor);
  CHECK(a.rope_high_freq_factor == b.rope_high_freq_factor);
  CHECK(a.rope_original_max_position == b.rope_original_max_position);
}

// A folder's tensors read and exported again: the same names (less a tied head's) and bits.
void check_folder_round_trip(const nlohmann::json& config, const std::vector<HfTensor>& tensors) {
  TempDir dir;
  write_hf_folder(dir.path() / "m", config, tensors, "F32");
  const HfWeights w = read_hf_weights(HfFolder(dir / "m"));
  const auto exported = hf_export_tensors(w.config.model, w.params);
  std::set<std::string> want;
  for (const auto& t : tensors) want.insert(t.name);
  std::set<std::string> got;
  for (const auto& e : exported) {
    INFO(e.name);
    got.insert(e.name);
    const HfTensor& t = hf_tensor(tensors, e.name);
    CHECK(e.tensor.shape() == Shape(t.shape));
    REQUIRE(static_cast<std::size_t>(e.tensor.numel()) == t.values.size());
    CHECK(std::memcmp(e.tensor.f32(), t.values.data(), t.values.size() * 4) == 0);
  }
  CHECK(got == want);
}

}  // namespace

TEST_CASE("hf_config_json reads back as the same model: Llama with GQA and llama3 rope scaling, GPT-2") {
  for (const bool tied : {false, true}) {
    INFO("tied " << tied);
    const GptConfig m = llama3_model(tied);
    const auto json = hf_config_json(m, "float32");
    CHECK(json["architectures"][0] == "LlamaForCausalLM");
    CHECK(json["model_type"] == "llama");
    CHECK(json["torch_dtype"] == "float32");
    CHECK(json["head_dim"] == 8);
    CHECK(json["num_key_value_heads"] == 1);
    CHECK(json["rope_scaling"]["rope_type"] == "llama3");
    CHECK(json["attention_bias"] == false);
    CHECK(json["mlp_bias"] == false);
    const auto back = parse_hf_config(nlohmann::json::parse(json.dump()), "config.json");
    CHECK(back.architecture == "LlamaForCausalLM");
    CHECK(back.max_positions == m.seq_len);
    check_same_model(back.model, m);
  }
  GptConfig plain = llama3_model(false);
  plain.rope_scaling = RopeScaling::none;
  CHECK(hf_config_json(plain, "bfloat16")["rope_scaling"].is_null());
  CHECK(hf_config_json(plain, "bfloat16")["torch_dtype"] == "bfloat16");
  check_same_model(parse_hf_config(nlohmann::json::parse(hf_config_json(plain, "bfloat16").dump()), "c").model, plain);

  for (const bool tied : {false, true}) {
    GptConfig g;
    g.layers = 2;
    g.d_model = 48;
    g.heads = 3;
    g.seq_len = 40;
    g.vocab = 270;
    g.tie_embeddings = tied;
    const auto json = hf_config_json(g, "float32");
    CHECK(json["architectures"][0] == "GPT2LMHeadModel");
    CHECK(json["n_positions"] == 40);
    CHECK(json["n_ctx"] == 40);
    CHECK(json["activation_function"] == "gelu_new");
    CHECK(json["layer_norm_epsilon"] == 1e-5);
    check_same_model(parse_hf_config(nlohmann::json::parse(json.dump()), "config.json").model, g);
  }
}

TEST_CASE("split_hf_recipe undoes apply_hf_recipe bit for bit, for every parameter of both architectures") {
  GptConfig gpt2;
  gpt2.layers = 2;
  gpt2.d_model = 16;
  gpt2.heads = 2;
  gpt2.seq_len = 12;
  gpt2.vocab = 50;
  for (const GptConfig& m : {llama3_model(false), llama3_model(true), gpt2}) {
    std::mt19937 rng(5);
    for (const auto& r : hf_param_recipes(m, hf_default_prefix(m.arch), m.seq_len)) {
      INFO(r.param);
      Tensor p = Tensor::uninitialized(r.shape);
      for (auto& v : p.f32_span()) v = std::normal_distribution<float>(0.0f, 1.0f)(rng);
      const auto sources = split_hf_recipe(r, p);
      REQUIRE(sources.size() == r.sources.size());
      for (std::size_t i = 0; i < sources.size(); ++i) CHECK(sources[i].shape() == r.sources[i].shape);
      CHECK(same_bits(apply_hf_recipe(r, sources), p));
    }
  }
}

TEST_CASE("a Hugging Face folder read and exported again gives its own tensors, a tied head left out") {
  const auto gqa = small_llama_config(2, 32, 4, 2, 48, 260, false);
  check_folder_round_trip(gqa, llama_tensors(gqa, "F32", 4));
  const auto tied = small_llama_config(2, 32, 4, 1, 48, 260, true);
  check_folder_round_trip(tied, llama_tensors(tied, "F32", 5));
  auto gpt2 = small_gpt2_config(2, 32, 4, 260, 64);
  check_folder_round_trip(gpt2, gpt2_tensors(gpt2, "F32", 6));
  gpt2["tie_word_embeddings"] = false;
  auto untied = gpt2_tensors(gpt2, "F32", 7);
  std::mt19937 rng(8);
  untied.push_back(random_tensor(rng, "lm_head.weight", {260, 32}, "F32"));
  check_folder_round_trip(gpt2, untied);
}

TEST_CASE("hf_export_tensors names every missing or misshapen parameter") {
  GptConfig g;
  g.layers = 1;
  g.d_model = 16;
  g.heads = 2;
  g.seq_len = 8;
  g.vocab = 40;
  std::vector<NamedTensor> params;
  for (const auto& r : hf_param_recipes(g, hf_default_prefix(g.arch), g.seq_len))
    if (r.param != "ln_f.bias") params.push_back({r.param, Tensor::zeros(r.param == "wpe.weight" ? Shape{9, 16} : r.shape)});
  std::string message;
  try {
    hf_export_tensors(g, params);
  } catch (const InputError& e) {
    message = e.what();
  }
  CHECK(contains(message, "ln_f.bias is missing"));
  CHECK(contains(message, "wpe.weight is"));
  CHECK(contains(message, "(8, 16)"));
}
