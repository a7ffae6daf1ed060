#include "kernels/model/param_layout.hpp"

#include <cmath>

namespace conveyor {
namespace {

constexpr double kInitStd = 0.02;

std::string block_name(int block, const char* rest) { return "blocks." + std::to_string(block) + "." + rest; }

}  // namespace

std::vector<ParamLayout> stage_param_layout(const GptConfig& c, const StageSlice& s) {
  const std::int64_t C = c.d_model, V = c.vocab, H = c.mlp_hidden();
  // GPT-2's scaled init of the projections that feed the residual stream.
  const double resid_std = kInitStd / std::sqrt(2.0 * static_cast<double>(c.layers));
  std::vector<ParamLayout> out;
  auto normal = [&](std::string name, Shape shape, double stddev, bool decay) {
    std::string stream = name;
    out.push_back({std::move(name), std::move(shape), decay, ParamLayout::Init::normal, stddev, std::move(stream)});
  };
  auto constant = [&](std::string name, Shape shape, float value) {
    out.push_back({std::move(name), std::move(shape), false, ParamLayout::Init::constant, 0.0, {}, value});
  };
  if (s.has_embedding) {
    normal("wte.weight", {V, C}, kInitStd, false);
    normal("wpe.weight", {c.seq_len, C}, kInitStd, false);
  }
  for (int b = s.first_block; b < s.end_block(); ++b) {
    if (s.holds_attention(b)) {
      constant(block_name(b, "ln1.weight"), {C}, 1.0f);
      constant(block_name(b, "ln1.bias"), {C}, 0.0f);
      normal(block_name(b, "attn.qkv.weight"), {3 * C, C}, kInitStd, true);
      constant(block_name(b, "attn.qkv.bias"), {3 * C}, 0.0f);
      normal(block_name(b, "attn.proj.weight"), {C, C}, resid_std, true);
      constant(block_name(b, "attn.proj.bias"), {C}, 0.0f);
    }
    if (s.holds_mlp(b)) {
      constant(block_name(b, "ln2.weight"), {C}, 1.0f);
      constant(block_name(b, "ln2.bias"), {C}, 0.0f);
      normal(block_name(b, "mlp.fc1.weight"), {H, C}, kInitStd, true);
      constant(block_name(b, "mlp.fc1.bias"), {H}, 0.0f);
      normal(block_name(b, "mlp.fc2.weight"), {C, H}, resid_std, true);
      constant(block_name(b, "mlp.fc2.bias"), {C}, 0.0f);
    }
  }
  if (s.has_head) {
    constant("ln_f.weight", {C}, 1.0f);
    constant("ln_f.bias", {C}, 0.0f);
    if (c.tie_embeddings) {
      // The embedding's copy: its values (its stream), and no weight decay, as wte —
      // AdamW must treat both copies alike for them to stay equal.
      normal("lm_head.weight", {V, C}, kInitStd, false);
      out.back().stream = "wte.weight";
    } else {
      normal("lm_head.weight", {V, C}, kInitStd, true);
    }
  }
  return out;
}

}  // namespace conveyor
