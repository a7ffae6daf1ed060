#pragma once
// How each conveyor parameter is made from a Hugging Face model's tensors, for the two
// architectures of hf_config.hpp. Weights of both are stored (out, in), PyTorch's Linear
// layout, except GPT-2's Conv1D, stored (in, out): transposed here.
//   Llama (prefix "model.")                        conveyor
//   embed_tokens.weight                            wte.weight
//   layers.<b>.input_layernorm.weight              blocks.<b>.attn_norm.weight
//   layers.<b>.self_attn.{q,k,v}_proj.weight       blocks.<b>.attn.qkv.weight: q, k, v stacked
//                                                  by rows ((NH + 2 NKV) hs, C), the row order
//                                                  gqa_attention.hpp reads: [q | k | v], each
//                                                  head's hs rows in head order
//   layers.<b>.self_attn.o_proj.weight             blocks.<b>.attn.o.weight
//   layers.<b>.post_attention_layernorm.weight     blocks.<b>.mlp_norm.weight
//   layers.<b>.mlp.{gate,up}_proj.weight           blocks.<b>.mlp.gate_up.weight: gate's rows
//                                                  then up's (2F, C), swiglu.hpp's [gate | up]
//   layers.<b>.mlp.down_proj.weight                blocks.<b>.mlp.down.weight
//   norm.weight                                    norm_f.weight
//   lm_head.weight (no prefix)                     lm_head.weight; tied: embed_tokens.weight
//   GPT-2 (prefix "transformer.", or none as in the original OpenAI upload)
//   wte.weight, wpe.weight                         wte.weight, wpe.weight (its first seq_len rows)
//   h.<b>.ln_1.{weight,bias}                       blocks.<b>.ln1.{weight,bias}
//   h.<b>.attn.c_attn.{weight,bias}                blocks.<b>.attn.qkv.{weight,bias}, weight transposed
//   h.<b>.attn.c_proj.{weight,bias}                blocks.<b>.attn.proj.{weight,bias}, weight transposed
//   h.<b>.ln_2.{weight,bias}                       blocks.<b>.ln2.{weight,bias}
//   h.<b>.mlp.c_fc.{weight,bias}                   blocks.<b>.mlp.fc1.{weight,bias}, weight transposed
//   h.<b>.mlp.c_proj.{weight,bias}                 blocks.<b>.mlp.fc2.{weight,bias}, weight transposed
//   ln_f.{weight,bias}                             ln_f.{weight,bias}
//   lm_head.weight (no prefix)                     lm_head.weight; tied: wte.weight
// GPT-2 splits c_attn's output into q, k, v of C columns each, heads in order, as conveyor's
// attention reads its qkv, so the transpose is all it needs; Llama's rotate-half rotary is
// conveyor's (kernels/cpu/rotary.hpp), so q and k need no permutation.
#include <string>
#include <vector>

#include "kernels/model/gpt_config.hpp"
#include "kernels/tensor/tensor.hpp"

namespace conveyor {

/// One Hugging Face tensor a parameter is made from, with the shape it must have.
struct HfSource {
  std::string name;
  Shape shape;
};

enum class HfOp {
  copy,        // one source, same shape
  transpose,   // one 2-D source (in, out) -> (out, in)
  stack_rows,  // sources of equal columns, stacked in order
  first_rows,  // one source, its first rows (the parameter's row count)
};

struct HfParamRecipe {
  std::string param;  // conveyor's name
  Shape shape;        // conveyor's shape
  HfOp op = HfOp::copy;
  std::vector<HfSource> sources;
};

/// The prefix of the base model's tensors in a folder written by transformers.
std::string hf_default_prefix(ModelArch arch);

/// Every parameter of the whole model `c` (stage_param_layout's order and shapes: one
/// stage holding everything), each with its recipe. `prefix`: of the base model's tensors
/// (hf_default_prefix, or "" for GPT-2's original upload); lm_head.weight has none.
/// `positions`: GPT-2's wpe rows in the folder (n_positions, >= c.seq_len); unused for Llama.
std::vector<HfParamRecipe> hf_param_recipes(const GptConfig& c, const std::string& prefix,
                                            std::int64_t positions);

/// Tensors a folder may hold that carry no weight of the model: buffers older
/// transformers saved (rotary inv_freq, GPT-2's attention masks) and, when tied, an
/// lm_head.weight (transformers ignores it then).
bool hf_ignorable_tensor(const GptConfig& c, const std::string& prefix, const std::string& name);

/// The parameter from its sources, in the recipe's order.
/// REQUIRES: sources match the recipe's count and shapes (std::invalid_argument otherwise).
Tensor apply_hf_recipe(const HfParamRecipe& recipe, const std::vector<Tensor>& sources);

/// The way back: the sources a parameter was made from, in the recipe's order, such that
/// apply_hf_recipe(recipe, split_hf_recipe(recipe, param)) is `param` bit for bit (rows
/// unstacked, Conv1D weights transposed back to (in, out)).
/// REQUIRES: `param` is f32 of the recipe's shape, and a first_rows recipe keeps every row
/// (made with positions = c.seq_len) (std::invalid_argument otherwise).
std::vector<Tensor> split_hf_recipe(const HfParamRecipe& recipe, const Tensor& param);

}  // namespace conveyor
