#pragma once
// model.arch: which decoder a model is, and model.rope_scaling: how a Llama rescales its
// rotary frequencies. Parsed once into these types (config_value.hpp reads them).
//   gpt2   pre-norm blocks of LayerNorm, fused qkv with biases, multi-head attention, GELU
//          MLP with biases; learned position embedding (kernels/model/gpt2_layers.hpp)
//   llama  pre-norm blocks of RMSNorm, fused qkv without biases, rotary positions on q and
//          k, grouped-query attention, SwiGLU MLP without biases; no position embedding
//          (kernels/model/llama_layers.hpp)
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor {

enum class ModelArch { gpt2, llama };

std::string_view model_arch_name(ModelArch a);
std::optional<ModelArch> parse_model_arch(std::string_view name);
const std::vector<std::string>& known_model_arch_names();

/// model.rope_scaling: none, or Llama 3.1's "llama3" rule (kernels/cpu/rotary.hpp).
enum class RopeScaling { none, llama3 };

std::string_view rope_scaling_name(RopeScaling r);
std::optional<RopeScaling> parse_rope_scaling(std::string_view name);
const std::vector<std::string>& known_rope_scaling_names();

}  // namespace conveyor
