#include "kernels/model/llama_layers.hpp"

#include "kernels/cpu/embedding.hpp"
#include "kernels/cpu/gqa_attention.hpp"
#include "kernels/cpu/linear.hpp"
#include "kernels/cpu/residual.hpp"
#include "kernels/cpu/rmsnorm.hpp"
#include "kernels/cpu/rotary.hpp"
#include "kernels/cpu/swiglu.hpp"
#include "kernels/model/lm_head.hpp"

namespace conveyor::llama {
namespace {

// Parameter positions within each layer (the order of its layout()).
enum AttentionParam : std::size_t { attn_norm_w, qkv_w, o_w };
enum MlpParam : std::size_t { mlp_norm_w, gate_up_w, down_w };
enum HeadParam : std::size_t { norm_f_w, lm_head_w };

}  // namespace

Context::Context(const GptConfig& c) {
  const std::int64_t D = c.head_dim(), T = c.seq_len;
  std::vector<double> inv_freq = cpu::rotary_inv_freq(D, c.rope_theta);
  if (c.rope_scaling == RopeScaling::llama3) {
    cpu::RotaryLlama3Scaling s;
    s.factor = c.rope_scaling_factor;
    s.low_freq_factor = c.rope_low_freq_factor;
    s.high_freq_factor = c.rope_high_freq_factor;
    s.original_max_position_embeddings = static_cast<double>(c.rope_original_max_position);
    cpu::rotary_llama3_scaling(inv_freq, s);
  }
  cos = Tensor::uninitialized({T, D / 2});
  sin = Tensor::uninitialized({T, D / 2});
  cpu::rotary_tables(cos.f32(), sin.f32(), inv_freq.data(), T, D);
}

// --- embedding: wte.weight (V, C)

void Embedding::layout(const GptConfig& c, std::vector<ParamLayout>& out) {
  add_normal_param(out, "wte.weight", {c.vocab, c.d_model}, kInitStd, false);
}

void Embedding::forward(float* out, const std::int32_t* tokens, std::int64_t B,
                        std::int64_t T) const {
  cpu::token_embedding_forward(out, tokens, p_.w(0), B, T, c_.d_model);
}

void Embedding::backward_weight(const float* dout, const std::int32_t* tokens, std::int64_t B,
                                std::int64_t T) const {
  cpu::token_embedding_backward_weight(p_.g(0), dout, tokens, B, T, c_.d_model);
}

// --- attention half

std::int64_t AttentionHalf::qkv_width() const {
  return c_.d_model + 2 * c_.kv_head_count() * c_.head_dim();
}

void AttentionHalf::layout(const GptConfig& c, int b, std::vector<ParamLayout>& out) {
  const std::int64_t C = c.d_model, W = C + 2 * c.kv_head_count() * c.head_dim();
  add_constant_param(out, block_param_name(b, "attn_norm.weight"), {C}, 1.0f);
  add_normal_param(out, block_param_name(b, "attn.qkv.weight"), {W, C}, kInitStd, true);
  add_normal_param(out, block_param_name(b, "attn.o.weight"), {C, C}, residual_init_std(c), true);
}

void AttentionHalf::forward_inner(Acts& a, std::int64_t B, std::int64_t T) const {
  const std::int64_t C = c_.d_model, NH = c_.heads, NKV = c_.kv_head_count(), hs = c_.head_dim(),
                     W = qkv_width(), N = B * T;
  a.xn = Tensor::uninitialized({B, T, C});
  a.rstd = Tensor::uninitialized({B, T});
  cpu::rmsnorm_forward(a.xn.f32(), a.rstd.f32(), a.x.f32(), p_.w(attn_norm_w), c_.norm_eps, N, C);
  a.qkv = Tensor::uninitialized({B, T, W});
  cpu::linear_forward<float>(a.qkv.f32(), a.xn.f32(), p_.w(qkv_w), nullptr, N, C, W);
  cpu::rotary_forward(a.qkv.f32(), ctx_->cos.f32(), ctx_->sin.f32(), B, T, NH, hs, W);
  cpu::rotary_forward(a.qkv.f32() + C, ctx_->cos.f32(), ctx_->sin.f32(), B, T, NKV, hs, W);
  a.att = Tensor::uninitialized({B, NH, T, T});
  a.atty = Tensor::uninitialized({B, T, C});
  cpu::gqa_attention_forward(a.atty.f32(), a.att.f32(), a.qkv.f32(), B, T, C, NH, NKV);
}

Tensor AttentionHalf::forward_output(const Acts& a, std::int64_t B, std::int64_t T) const {
  const std::int64_t C = c_.d_model, N = B * T;
  Tensor out = Tensor::uninitialized({B, T, C});
  cpu::linear_forward<float>(out.f32(), a.atty.f32(), p_.w(o_w), nullptr, N, C, C);
  cpu::residual_forward(out.f32(), a.x.f32(), out.f32(), N * C);
  return out;
}

void AttentionHalf::drop_inner(Acts& a) const { a.xn = a.rstd = a.qkv = a.att = a.atty = Tensor{}; }

Tensor AttentionHalf::backward_input(Acts& a, const Tensor& d_out, std::int64_t B,
                                     std::int64_t T) const {
  const std::int64_t C = c_.d_model, NH = c_.heads, NKV = c_.kv_head_count(), hs = c_.head_dim(),
                     W = qkv_width(), N = B * T;
  a.d_out = d_out;  // read, never written
  Tensor d_atty = Tensor::uninitialized({B, T, C});
  cpu::linear_backward_input(d_atty.f32(), d_out.f32(), p_.w(o_w), N, C, C);
  a.d_qkv = Tensor::uninitialized({B, T, W});
  cpu::gqa_attention_backward_input(a.d_qkv.f32(), d_atty.f32(), a.qkv.f32(), a.att.f32(), B, T, C,
                                    NH, NKV);
  a.qkv = {};
  a.att = {};
  cpu::rotary_backward(a.d_qkv.f32(), ctx_->cos.f32(), ctx_->sin.f32(), B, T, NH, hs, W);
  cpu::rotary_backward(a.d_qkv.f32() + C, ctx_->cos.f32(), ctx_->sin.f32(), B, T, NKV, hs, W);
  a.d_xn = Tensor::uninitialized({B, T, C});
  cpu::linear_backward_input(a.d_xn.f32(), a.d_qkv.f32(), p_.w(qkv_w), N, C, W);
  Tensor dx = d_out.clone();
  cpu::rmsnorm_backward_input(dx.f32(), a.d_xn.f32(), a.x.f32(), p_.w(attn_norm_w), a.rstd.f32(), N,
                              C);
  return dx;
}

void AttentionHalf::backward_weight(const Acts& a, std::int64_t B, std::int64_t T) const {
  const std::int64_t C = c_.d_model, W = qkv_width(), N = B * T;
  cpu::linear_backward_weight<float>(p_.g(o_w), nullptr, a.d_out.f32(), a.atty.f32(), N, C, C);
  cpu::linear_backward_weight<float>(p_.g(qkv_w), nullptr, a.d_qkv.f32(), a.xn.f32(), N, C, W);
  cpu::rmsnorm_backward_weight(p_.g(attn_norm_w), a.d_xn.f32(), a.x.f32(), a.rstd.f32(), N, C);
}

// --- MLP half

void MlpHalf::layout(const GptConfig& c, int b, std::vector<ParamLayout>& out) {
  const std::int64_t C = c.d_model, F = c.llama_ffn_dim();
  add_constant_param(out, block_param_name(b, "mlp_norm.weight"), {C}, 1.0f);
  add_normal_param(out, block_param_name(b, "mlp.gate_up.weight"), {2 * F, C}, kInitStd, true);
  add_normal_param(out, block_param_name(b, "mlp.down.weight"), {C, F}, residual_init_std(c), true);
}

void MlpHalf::forward_inner(Acts& a, std::int64_t B, std::int64_t T) const {
  const std::int64_t C = c_.d_model, F = c_.llama_ffn_dim(), N = B * T;
  a.xn = Tensor::uninitialized({B, T, C});
  a.rstd = Tensor::uninitialized({B, T});
  cpu::rmsnorm_forward(a.xn.f32(), a.rstd.f32(), a.x.f32(), p_.w(mlp_norm_w), c_.norm_eps, N, C);
  a.gate_up = Tensor::uninitialized({B, T, 2 * F});
  cpu::linear_forward<float>(a.gate_up.f32(), a.xn.f32(), p_.w(gate_up_w), nullptr, N, C, 2 * F);
  a.h = Tensor::uninitialized({B, T, F});
  cpu::swiglu_forward(a.h.f32(), a.gate_up.f32(), N, F);
}

Tensor MlpHalf::forward_output(const Acts& a, std::int64_t B, std::int64_t T) const {
  const std::int64_t C = c_.d_model, F = c_.llama_ffn_dim(), N = B * T;
  Tensor out = Tensor::uninitialized({B, T, C});
  cpu::linear_forward<float>(out.f32(), a.h.f32(), p_.w(down_w), nullptr, N, F, C);
  cpu::residual_forward(out.f32(), a.x.f32(), out.f32(), N * C);
  return out;
}

void MlpHalf::drop_inner(Acts& a) const { a.xn = a.rstd = a.gate_up = a.h = Tensor{}; }

Tensor MlpHalf::backward_input(Acts& a, const Tensor& d_out, std::int64_t B, std::int64_t T) const {
  const std::int64_t C = c_.d_model, F = c_.llama_ffn_dim(), N = B * T;
  a.d_out = d_out;  // read, never written
  Tensor d_h = Tensor::uninitialized({B, T, F});
  cpu::linear_backward_input(d_h.f32(), d_out.f32(), p_.w(down_w), N, F, C);
  a.d_gate_up = Tensor::uninitialized({B, T, 2 * F});
  cpu::swiglu_backward_input(a.d_gate_up.f32(), d_h.f32(), a.gate_up.f32(), N, F);
  a.gate_up = {};
  a.d_xn = Tensor::uninitialized({B, T, C});
  cpu::linear_backward_input(a.d_xn.f32(), a.d_gate_up.f32(), p_.w(gate_up_w), N, C, 2 * F);
  Tensor dx = d_out.clone();
  cpu::rmsnorm_backward_input(dx.f32(), a.d_xn.f32(), a.x.f32(), p_.w(mlp_norm_w), a.rstd.f32(), N,
                              C);
  return dx;
}

void MlpHalf::backward_weight(const Acts& a, std::int64_t B, std::int64_t T) const {
  const std::int64_t C = c_.d_model, F = c_.llama_ffn_dim(), N = B * T;
  cpu::linear_backward_weight<float>(p_.g(down_w), nullptr, a.d_out.f32(), a.h.f32(), N, F, C);
  cpu::linear_backward_weight<float>(p_.g(gate_up_w), nullptr, a.d_gate_up.f32(), a.xn.f32(), N, C,
                                     2 * F);
  cpu::rmsnorm_backward_weight(p_.g(mlp_norm_w), a.d_xn.f32(), a.x.f32(), a.rstd.f32(), N, C);
}

// --- head: norm_f.weight, lm_head.weight

void Head::layout(const GptConfig& c, std::vector<ParamLayout>& out) {
  add_constant_param(out, "norm_f.weight", {c.d_model}, 1.0f);
  add_lm_head_param(out, c);
}

double Head::forward(const Tensor& x, const Tensor& targets, Acts& h, std::int64_t B,
                     std::int64_t T, Tensor* logits_out) const {
  const std::int64_t C = c_.d_model, N = B * T;
  h.targets = targets;
  h.x = x;
  h.xn = Tensor::uninitialized({B, T, C});
  h.rstd = Tensor::uninitialized({B, T});
  cpu::rmsnorm_forward(h.xn.f32(), h.rstd.f32(), x.f32(), p_.w(norm_f_w), c_.norm_eps, N, C);
  return lm_head_forward(h.logits, h.xn, h.targets, p_.w(lm_head_w), B, T, C, c_.vocab, logits_out);
}

Tensor Head::backward_input(Acts& h, float loss_scale, std::int64_t B, std::int64_t T) const {
  const std::int64_t C = c_.d_model, N = B * T;
  h.d_xn =
      lm_head_backward_input(h.logits, h.targets, p_.w(lm_head_w), loss_scale, B, T, C, c_.vocab);
  Tensor dx = Tensor::zeros({B, T, C});  // zeros: rmsnorm_backward_input adds into it
  cpu::rmsnorm_backward_input(dx.f32(), h.d_xn.f32(), h.x.f32(), p_.w(norm_f_w), h.rstd.f32(), N,
                              C);
  return dx;
}

void Head::backward_weight(const Acts& h, std::int64_t B, std::int64_t T) const {
  const std::int64_t C = c_.d_model, N = B * T;
  lm_head_backward_weight(p_.g(lm_head_w), h.logits, h.xn, B, T, C, c_.vocab);
  cpu::rmsnorm_backward_weight(p_.g(norm_f_w), h.d_xn.f32(), h.x.f32(), h.rstd.f32(), N, C);
}

}  // namespace conveyor::llama
