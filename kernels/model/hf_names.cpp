#include "kernels/model/hf_names.hpp"

#include <cstring>
#include <regex>
#include <stdexcept>

#include "kernels/model/param_layout.hpp"

namespace conveyor {
namespace {

// "blocks.<b>.<rest>" -> b and rest; false for a name outside the blocks.
bool split_block_name(const std::string& name, int& block, std::string& rest) {
  if (name.rfind("blocks.", 0) != 0) return false;
  const auto dot = name.find('.', 7);
  block = std::stoi(name.substr(7, dot - 7));
  rest = name.substr(dot + 1);
  return true;
}

HfParamRecipe llama_recipe(const GptConfig& c, const ParamLayout& p, const std::string& pre) {
  const std::int64_t C = c.d_model, V = c.vocab, F = c.llama_ffn_dim(), kv = c.kv_head_count() * c.head_dim();
  HfParamRecipe r{p.name, p.shape, HfOp::copy, {}};
  int b = 0;
  std::string rest;
  if (p.name == "wte.weight") {
    r.sources = {{pre + "embed_tokens.weight", {V, C}}};
  } else if (p.name == "norm_f.weight") {
    r.sources = {{pre + "norm.weight", {C}}};
  } else if (p.name == "lm_head.weight") {
    r.sources = {{c.tie_embeddings ? pre + "embed_tokens.weight" : "lm_head.weight", {V, C}}};
  } else if (split_block_name(p.name, b, rest)) {
    const std::string L = pre + "layers." + std::to_string(b) + ".";
    if (rest == "attn_norm.weight") {
      r.sources = {{L + "input_layernorm.weight", {C}}};
    } else if (rest == "attn.qkv.weight") {
      r.op = HfOp::stack_rows;
      r.sources = {{L + "self_attn.q_proj.weight", {C, C}},
                   {L + "self_attn.k_proj.weight", {kv, C}},
                   {L + "self_attn.v_proj.weight", {kv, C}}};
    } else if (rest == "attn.o.weight") {
      r.sources = {{L + "self_attn.o_proj.weight", {C, C}}};
    } else if (rest == "mlp_norm.weight") {
      r.sources = {{L + "post_attention_layernorm.weight", {C}}};
    } else if (rest == "mlp.gate_up.weight") {
      r.op = HfOp::stack_rows;
      r.sources = {{L + "mlp.gate_proj.weight", {F, C}}, {L + "mlp.up_proj.weight", {F, C}}};
    } else if (rest == "mlp.down.weight") {
      r.sources = {{L + "mlp.down_proj.weight", {C, F}}};
    }
  }
  if (r.sources.empty()) throw std::logic_error("hf_param_recipes: no Llama recipe for " + p.name);
  return r;
}

HfParamRecipe gpt2_recipe(const GptConfig& c, const ParamLayout& p, const std::string& pre, std::int64_t positions) {
  const std::int64_t C = c.d_model, V = c.vocab, H = c.mlp_hidden();
  HfParamRecipe r{p.name, p.shape, HfOp::copy, {}};
  int b = 0;
  std::string rest;
  auto conv1d = [&](const std::string& name, std::int64_t in, std::int64_t out) {
    r.op = HfOp::transpose;
    r.sources = {{name, {in, out}}};
  };
  if (p.name == "wte.weight") {
    r.sources = {{pre + "wte.weight", {V, C}}};
  } else if (p.name == "wpe.weight") {
    r.op = HfOp::first_rows;
    r.sources = {{pre + "wpe.weight", {positions, C}}};
  } else if (p.name == "ln_f.weight" || p.name == "ln_f.bias") {
    r.sources = {{pre + p.name, {C}}};
  } else if (p.name == "lm_head.weight") {
    r.sources = {{c.tie_embeddings ? pre + "wte.weight" : "lm_head.weight", {V, C}}};
  } else if (split_block_name(p.name, b, rest)) {
    const std::string L = pre + "h." + std::to_string(b) + ".";
    if (rest == "ln1.weight") r.sources = {{L + "ln_1.weight", {C}}};
    else if (rest == "ln1.bias") r.sources = {{L + "ln_1.bias", {C}}};
    else if (rest == "attn.qkv.weight") conv1d(L + "attn.c_attn.weight", C, 3 * C);
    else if (rest == "attn.qkv.bias") r.sources = {{L + "attn.c_attn.bias", {3 * C}}};
    else if (rest == "attn.proj.weight") conv1d(L + "attn.c_proj.weight", C, C);
    else if (rest == "attn.proj.bias") r.sources = {{L + "attn.c_proj.bias", {C}}};
    else if (rest == "ln2.weight") r.sources = {{L + "ln_2.weight", {C}}};
    else if (rest == "ln2.bias") r.sources = {{L + "ln_2.bias", {C}}};
    else if (rest == "mlp.fc1.weight") conv1d(L + "mlp.c_fc.weight", C, H);
    else if (rest == "mlp.fc1.bias") r.sources = {{L + "mlp.c_fc.bias", {H}}};
    else if (rest == "mlp.fc2.weight") conv1d(L + "mlp.c_proj.weight", H, C);
    else if (rest == "mlp.fc2.bias") r.sources = {{L + "mlp.c_proj.bias", {C}}};
  }
  if (r.sources.empty()) throw std::logic_error("hf_param_recipes: no GPT-2 recipe for " + p.name);
  return r;
}

}  // namespace

std::string hf_default_prefix(ModelArch arch) { return arch == ModelArch::llama ? "model." : "transformer."; }

std::vector<HfParamRecipe> hf_param_recipes(const GptConfig& c, const std::string& prefix, std::int64_t positions) {
  StageSlice whole;
  whole.num_blocks = static_cast<int>(c.layers);
  whole.has_embedding = whole.has_head = true;
  std::vector<HfParamRecipe> out;
  for (const auto& p : stage_param_layout(c, whole))
    out.push_back(c.arch == ModelArch::llama ? llama_recipe(c, p, prefix) : gpt2_recipe(c, p, prefix, positions));
  return out;
}

bool hf_ignorable_tensor(const GptConfig& c, const std::string& prefix, const std::string& name) {
  if (c.tie_embeddings && name == "lm_head.weight") return true;
  static const std::regex llama_buffers(R"(layers\.\d+\.self_attn\.rotary_emb\.inv_freq)");
  static const std::regex gpt2_buffers(R"(h\.\d+\.attn\.(bias|masked_bias))");
  if (name.rfind(prefix, 0) != 0) return false;
  const std::string rest = name.substr(prefix.size());
  return std::regex_match(rest, c.arch == ModelArch::llama ? llama_buffers : gpt2_buffers);
}

Tensor apply_hf_recipe(const HfParamRecipe& r, const std::vector<Tensor>& sources) {
  if (sources.size() != r.sources.size())
    throw std::invalid_argument("apply_hf_recipe " + r.param + ": " + std::to_string(sources.size()) +
                                " sources for a recipe of " + std::to_string(r.sources.size()));
  for (std::size_t i = 0; i < sources.size(); ++i)
    if (sources[i].shape() != r.sources[i].shape || sources[i].dtype() != DType::f32)
      throw std::invalid_argument("apply_hf_recipe " + r.param + ": source " + r.sources[i].name + " is " +
                                  sources[i].describe());
  Tensor out = Tensor::uninitialized(r.shape);
  float* dst = out.f32();
  switch (r.op) {
    case HfOp::copy:
    case HfOp::first_rows:
      std::memcpy(dst, sources[0].f32(), out.bytes());  // the first rows are the first bytes
      break;
    case HfOp::stack_rows:
      for (const auto& s : sources) {
        std::memcpy(dst, s.f32(), s.bytes());
        dst += s.numel();
      }
      break;
    case HfOp::transpose: {
      const std::int64_t in = sources[0].shape()[0], outs = sources[0].shape()[1];
      const float* src = sources[0].f32();
      for (std::int64_t i = 0; i < in; ++i)
        for (std::int64_t o = 0; o < outs; ++o) dst[o * in + i] = src[i * outs + o];
      break;
    }
  }
  return out;
}

std::vector<Tensor> split_hf_recipe(const HfParamRecipe& r, const Tensor& param) {
  if (param.shape() != r.shape || param.dtype() != DType::f32)
    throw std::invalid_argument("split_hf_recipe " + r.param + ": the parameter is " + param.describe());
  if (r.op == HfOp::first_rows && r.sources[0].shape != r.shape)
    throw std::invalid_argument("split_hf_recipe " + r.param + ": the source " + r.sources[0].name +
                                " has other rows than the parameter (make the recipe with positions = seq_len)");
  std::vector<Tensor> out;
  const float* src = param.f32();
  for (const auto& s : r.sources) {
    Tensor t = Tensor::uninitialized(s.shape);
    float* dst = t.f32();
    switch (r.op) {
      case HfOp::copy:
      case HfOp::first_rows:
        std::memcpy(dst, src, t.bytes());
        break;
      case HfOp::stack_rows:
        std::memcpy(dst, src, t.bytes());
        src += t.numel();
        break;
      case HfOp::transpose: {  // param (out, in) -> source (in, out)
        const std::int64_t in = s.shape[0], outs = s.shape[1];
        for (std::int64_t i = 0; i < in; ++i)
          for (std::int64_t o = 0; o < outs; ++o) dst[i * outs + o] = src[o * in + i];
        break;
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace conveyor
