#include "apps/train/model_match.hpp"

#include <fmt/format.h>

namespace conveyor {

std::vector<std::string> model_differences(const GptConfig& then, const GptConfig& now, const std::string& label,
                                           SeqLenRule seq_len) {
  std::vector<std::string> diff;
  auto same = [&](const char* key, auto a, auto b) {
    if (a != b) diff.push_back(fmt::format("{} {} ({}) vs {} (this run)", key, a, label, b));
  };
  same("model.layers", then.layers, now.layers);
  same("model.d_model", then.d_model, now.d_model);
  same("model.heads", then.heads, now.heads);
  if (seq_len == SeqLenRule::same)
    same("model.seq_len", then.seq_len, now.seq_len);
  else if (now.arch == ModelArch::gpt2 && then.arch == ModelArch::gpt2 && now.seq_len > then.seq_len)
    diff.push_back(fmt::format("model.seq_len {} (this run) is longer than the {} positions of the {} (wpe's rows)",
                               now.seq_len, then.seq_len, label));
  same("model.vocab", then.vocab, now.vocab);
  same("model.tie_embeddings", then.tie_embeddings, now.tie_embeddings);
  same("model.arch", model_arch_name(then.arch), model_arch_name(now.arch));
  if (then.arch == ModelArch::llama && now.arch == ModelArch::llama) {
    same("model.kv_heads", then.kv_head_count(), now.kv_head_count());
    same("model.ffn_dim", then.llama_ffn_dim(), now.llama_ffn_dim());
    same("model.rope_theta", then.rope_theta, now.rope_theta);
    same("model.rope_scaling", rope_scaling_name(then.rope_scaling), rope_scaling_name(now.rope_scaling));
    if (now.rope_scaling == RopeScaling::llama3 && then.rope_scaling == RopeScaling::llama3) {
      same("model.rope_scaling_factor", then.rope_scaling_factor, now.rope_scaling_factor);
      same("model.rope_low_freq_factor", then.rope_low_freq_factor, now.rope_low_freq_factor);
      same("model.rope_high_freq_factor", then.rope_high_freq_factor, now.rope_high_freq_factor);
      same("model.rope_original_max_position", then.rope_original_max_position, now.rope_original_max_position);
    }
    same("model.norm_eps", then.norm_eps, now.norm_eps);
  }
  return diff;
}

}  // namespace conveyor
