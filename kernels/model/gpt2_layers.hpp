#pragma once
// GPT-2's layers on the CPU, as GptStage composes them (gpt_stage.cpp, stage_parts.hpp):
//   Embedding      wte[token] + wpe[position]
//   AttentionHalf  x + attn.proj(attention(attn.qkv(ln1(x))))       (biases everywhere)
//   MlpHalf        x + mlp.fc2(gelu(mlp.fc1(ln2(x))))
//   Head           lm_head(ln_f(x)) and the cross-entropy loss (lm_head.hpp)
// Parameters, in params() order per half (block_params.hpp, which the CUDA model indexes by):
//   attention ln1.weight, ln1.bias, attn.qkv.weight, attn.qkv.bias, attn.proj.weight,
//   attn.proj.bias; MLP ln2.weight, ln2.bias, mlp.fc1.weight, mlp.fc1.bias, mlp.fc2.weight,
//   mlp.fc2.bias; each name under blocks.<b>.
//
// A half block is the step out = x + f(x) of the residual stream (B, T, C). forward_inner
// computes f's activations from a.x (all that model.recompute drops and recomputes);
// forward_output adds f's last GEMM and the residual. backward_input keeps the gradient of
// the output (d_out) and what backward_weight needs, and returns the gradient of x.
// Memory per token, in floats: an attention half holds 6C + heads*T + 2 after forward,
// 8C + 2 after backward_input; an MLP half 10C + 2, then 12C + 2 (its input counted).
#include <array>
#include <cstdint>
#include <vector>

#include "kernels/model/layer_params.hpp"
#include "kernels/tensor/tensor.hpp"

namespace conveyor::gpt2 {

/// Nothing a GPT-2 stage's layers share.
struct Context {
  explicit Context(const GptConfig&) {}
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
  Tensor x;                        // (B, T, C) input, the residual stream
  Tensor ln1, ln1_mean, ln1_rstd;  // (B, T, C), (B, T), (B, T)
  Tensor qkv;                      // (B, T, 3C); freed by backward_input
  Tensor att;                      // (B, NH, T, T); freed by backward_input
  Tensor atty;                     // (B, T, C) attention output, input of attn.proj
  Tensor d_out;                    // (B, T, C) gradient of the output (res2)
  Tensor d_qkv;                    // (B, T, 3C)
  Tensor d_ln1;                    // (B, T, C)
  std::array<const Tensor*, 10> all() const {
    return {&x, &ln1, &ln1_mean, &ln1_rstd, &qkv, &att, &atty, &d_out, &d_qkv, &d_ln1};
  }
};

class AttentionHalf {
 public:
  using Acts = AttentionActs;
  AttentionHalf(const GptConfig& c, const Context&, LayerParams p) : c_(c), p_(p) {}
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

struct MlpActs {
  Tensor x;                        // (B, T, C) input (res2)
  Tensor ln2, ln2_mean, ln2_rstd;  // (B, T, C), (B, T), (B, T)
  Tensor fc1;                      // (B, T, 4C) pre-GELU; freed by backward_input
  Tensor gelu;                     // (B, T, 4C) input of mlp.fc2
  Tensor d_out;                    // (B, T, C) gradient of the output
  Tensor d_fc1;                    // (B, T, 4C) gradient of the pre-GELU activation
  Tensor d_ln2;                    // (B, T, C)
  std::array<const Tensor*, 9> all() const {
    return {&x, &ln2, &ln2_mean, &ln2_rstd, &fc1, &gelu, &d_out, &d_fc1, &d_ln2};
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
  Tensor targets;                  // (B, T) i32
  Tensor x;                        // (B, T, C) input of ln_f
  Tensor lnf, lnf_mean, lnf_rstd;  // (B, T, C), (B, T), (B, T)
  Tensor logits;                   // (B, T, V): logits, then probabilities, then dlogits
  Tensor d_lnf;                    // (B, T, C)
  std::array<const Tensor*, 7> all() const {
    return {&targets, &x, &lnf, &lnf_mean, &lnf_rstd, &logits, &d_lnf};
  }
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
  using Context = gpt2::Context;
  using Embedding = gpt2::Embedding;
  using AttentionHalf = gpt2::AttentionHalf;
  using MlpHalf = gpt2::MlpHalf;
  using Head = gpt2::Head;
};

}  // namespace conveyor::gpt2
