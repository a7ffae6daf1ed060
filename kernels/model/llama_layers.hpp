#pragma once
// Llama's layers on the CPU, as GptStage composes them (gpt_stage.cpp, stage_parts.hpp):
//   Embedding      wte[token]                                         (no position embedding)
//   AttentionHalf  x + attn.o(gqa(rotary(attn.qkv(rmsnorm(x)))))      (no biases)
//   MlpHalf        x + mlp.down(swiglu(mlp.gate_up(rmsnorm(x))))
//   Head           lm_head(rmsnorm(x)) and the cross-entropy loss (lm_head.hpp)
// Parameters, in params() order, named for a one-to-one import of Hugging Face's
// LlamaForCausalLM (HF name on the right; a fused weight is HF's weights stacked by rows):
//   wte.weight                       model.embed_tokens.weight
//   blocks.<b>.attn_norm.weight      model.layers.<b>.input_layernorm.weight
//   blocks.<b>.attn.qkv.weight       self_attn.q_proj, k_proj, v_proj   ((NH + 2 NKV) hs, C)
//   blocks.<b>.attn.o.weight         self_attn.o_proj                   (C, C)
//   blocks.<b>.mlp_norm.weight       post_attention_layernorm
//   blocks.<b>.mlp.gate_up.weight    mlp.gate_proj, mlp.up_proj         (2F, C)
//   blocks.<b>.mlp.down.weight       mlp.down_proj                      (C, F)
//   norm_f.weight                    model.norm.weight
//   lm_head.weight                   lm_head.weight (wte's copy when tied)
// Init: weights and wte Normal(0, 0.02), attn.o and mlp.down 0.02 / sqrt(2 layers) (GPT-2's
// scaled residual init), norms 1; decay on the four block weights and an untied head.
//
// The rotary embedding (rotate-half, HF's convention; kernels/cpu/rotary.hpp) is applied in
// place to the q and k parts of qkv after the projection, so attention reads the rotated
// qkv; its backward is applied to d_qkv before the projection's backward, so d_qkv (what
// attn.qkv's weight gradient reads) is the gradient of the projection's output.
// Memory per token, in floats, W = (NH + 2 NKV) hs the qkv width and F the MLP width: an
// attention half holds 3C + W + NH*T + 1 after forward, 5C + W + 1 after backward_input;
// an MLP half 2C + 3F + 1, then 4C + 3F + 1 (its input counted).
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/model/layer_params.hpp"
#include "kernels/tensor/tensor.hpp"

namespace conveyor::llama {

/// What a Llama stage's layers share: the rotary tables, (seq_len, hs/2) cos and sin of
/// t * w_i, computed in double and rounded once (model.rope_theta, model.rope_scaling).
struct Context {
  explicit Context(const GptConfig& c);
  Tensor cos, sin;
};

class Embedding {
 public:
  Embedding(const GptConfig& c, const Context&, LayerParams p) : c_(c), p_(p) {}
  static void layout(const GptConfig& c, std::vector<ParamLayout>& out);
  void forward(float* out, const std::int32_t* tokens, std::int64_t B, std::int64_t T) const;
  void backward_weight(const float* dout, const std::int32_t* tokens, std::int64_t B,
                       std::int64_t T) const;

 private:
  GptConfig c_;
  LayerParams p_;
};

struct AttentionActs {
  Tensor x;         // (B, T, C) input, the residual stream
  Tensor xn, rstd;  // (B, T, C), (B, T) RMSNorm output and statistic
  Tensor qkv;       // (B, T, W) q and k rotated; freed by backward_input
  Tensor att;       // (B, NH, T, T); freed by backward_input
  Tensor atty;      // (B, T, C) attention output, input of attn.o
  Tensor d_out;     // (B, T, C) gradient of the output
  Tensor d_qkv;     // (B, T, W) gradient of attn.qkv's output (before the rotation)
  Tensor d_xn;      // (B, T, C)
  std::array<const Tensor*, 9> all() const {
    return {&x, &xn, &rstd, &qkv, &att, &atty, &d_out, &d_qkv, &d_xn};
  }
};

class AttentionHalf {
 public:
  using Acts = AttentionActs;
  AttentionHalf(const GptConfig& c, const Context& ctx, LayerParams p) : c_(c), ctx_(&ctx), p_(p) {}
  static void layout(const GptConfig& c, int block, std::vector<ParamLayout>& out);
  void forward_inner(Acts& a, std::int64_t B, std::int64_t T) const;
  Tensor forward_output(const Acts& a, std::int64_t B, std::int64_t T) const;
  void drop_inner(Acts& a) const;
  Tensor backward_input(Acts& a, const Tensor& d_out, std::int64_t B, std::int64_t T) const;
  void backward_weight(const Acts& a, std::int64_t B, std::int64_t T) const;

 private:
  std::int64_t qkv_width() const;
  GptConfig c_;
  const Context* ctx_;  // the stage's, which outlives its layers
  LayerParams p_;
};

struct MlpActs {
  Tensor x;          // (B, T, C) input
  Tensor xn, rstd;   // (B, T, C), (B, T)
  Tensor gate_up;    // (B, T, 2F) rows [gate | up]; freed by backward_input
  Tensor h;          // (B, T, F) silu(gate) * up, input of mlp.down
  Tensor d_out;      // (B, T, C) gradient of the output
  Tensor d_gate_up;  // (B, T, 2F)
  Tensor d_xn;       // (B, T, C)
  std::array<const Tensor*, 8> all() const {
    return {&x, &xn, &rstd, &gate_up, &h, &d_out, &d_gate_up, &d_xn};
  }
};

class MlpHalf {
 public:
  using Acts = MlpActs;
  MlpHalf(const GptConfig& c, const Context&, LayerParams p) : c_(c), p_(p) {}
  static void layout(const GptConfig& c, int block, std::vector<ParamLayout>& out);
  void forward_inner(Acts& a, std::int64_t B, std::int64_t T) const;
  Tensor forward_output(const Acts& a, std::int64_t B, std::int64_t T) const;
  void drop_inner(Acts& a) const;
  Tensor backward_input(Acts& a, const Tensor& d_out, std::int64_t B, std::int64_t T) const;
  void backward_weight(const Acts& a, std::int64_t B, std::int64_t T) const;

 private:
  GptConfig c_;
  LayerParams p_;
};

struct HeadActs {
  Tensor targets;   // (B, T) i32
  Tensor x;         // (B, T, C) input of norm_f
  Tensor xn, rstd;  // (B, T, C), (B, T)
  Tensor logits;    // (B, T, V): logits, then probabilities, then dlogits
  Tensor d_xn;      // (B, T, C)
  std::array<const Tensor*, 6> all() const { return {&targets, &x, &xn, &rstd, &logits, &d_xn}; }
};

class Head {
 public:
  using Acts = HeadActs;
  Head(const GptConfig& c, const Context&, LayerParams p) : c_(c), p_(p) {}
  static void layout(const GptConfig& c, std::vector<ParamLayout>& out);
  /// `logits_out`: as lm_head_forward's (lm_head.hpp).
  double forward(const Tensor& x, const Tensor& targets, Acts& h, std::int64_t B,
                 std::int64_t T, Tensor* logits_out = nullptr) const;
  Tensor backward_input(Acts& h, float loss_scale, std::int64_t B, std::int64_t T) const;
  void backward_weight(const Acts& h, std::int64_t B, std::int64_t T) const;

 private:
  GptConfig c_;
  LayerParams p_;
};

/// The architecture, as GptStage's skeleton takes it.
struct Layers {
  using Context = llama::Context;
  using Embedding = llama::Embedding;
  using AttentionHalf = llama::AttentionHalf;
  using MlpHalf = llama::MlpHalf;
  using Head = llama::Head;
};

}  // namespace conveyor::llama
