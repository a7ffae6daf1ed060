// GPT-2's layers: the kernels of kernels/cpu/ in the order and on the shapes GptStage ran
// them before it took its layers from an architecture, so the bits are those.
#include "kernels/model/gpt2_layers.hpp"

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/embedding.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/layernorm.hpp"
#include "kernels/cpu/linear.hpp"
#include "kernels/cpu/residual.hpp"
#include "kernels/model/block_params.hpp"
#include "kernels/model/lm_head.hpp"

namespace conveyor::gpt2 {
namespace {

// A parameter's position within its half: block_params.hpp's order, which the CUDA model
// indexes by.
constexpr std::size_t in_half(BlockParam k) { return k % kParamsPerHalf; }

}  // namespace

// --- embedding: wte.weight (V, C), wpe.weight (seq_len, C)

void Embedding::layout(const GptConfig& c, std::vector<ParamLayout>& out) {
  add_normal_param(out, "wte.weight", {c.vocab, c.d_model}, kInitStd, false);
  add_normal_param(out, "wpe.weight", {c.seq_len, c.d_model}, kInitStd, false);
}

void Embedding::forward(float* out, const std::int32_t* tokens, std::int64_t B,
                        std::int64_t T) const {
  cpu::embedding_forward(out, tokens, p_.w(0), p_.w(1), B, T, c_.d_model);
}

void Embedding::backward_weight(const float* dout, const std::int32_t* tokens, std::int64_t B,
                                std::int64_t T) const {
  cpu::embedding_backward_weight(p_.g(0), p_.g(1), dout, tokens, B, T, c_.d_model);
}

// --- attention half

void AttentionHalf::layout(const GptConfig& c, int b, std::vector<ParamLayout>& out) {
  const std::int64_t C = c.d_model;
  add_constant_param(out, block_param_name(b, "ln1.weight"), {C}, 1.0f);
  add_constant_param(out, block_param_name(b, "ln1.bias"), {C}, 0.0f);
  add_normal_param(out, block_param_name(b, "attn.qkv.weight"), {3 * C, C}, kInitStd, true);
  add_constant_param(out, block_param_name(b, "attn.qkv.bias"), {3 * C}, 0.0f);
  add_normal_param(out, block_param_name(b, "attn.proj.weight"), {C, C}, residual_init_std(c),
                   true);
  add_constant_param(out, block_param_name(b, "attn.proj.bias"), {C}, 0.0f);
}

void AttentionHalf::forward_inner(Acts& a, std::int64_t B, std::int64_t T) const {
  const std::int64_t C = c_.d_model, NH = c_.heads, N = B * T;
  a.ln1 = Tensor::uninitialized({B, T, C});
  a.ln1_mean = Tensor::uninitialized({B, T});
  a.ln1_rstd = Tensor::uninitialized({B, T});
  cpu::layernorm_forward(a.ln1.f32(), a.ln1_mean.f32(), a.ln1_rstd.f32(), a.x.f32(),
                         p_.w(in_half(ln1_w)), p_.w(in_half(ln1_b)), N, C);
  a.qkv = Tensor::uninitialized({B, T, 3 * C});
  cpu::linear_forward(a.qkv.f32(), a.ln1.f32(), p_.w(in_half(qkv_w)), p_.w(in_half(qkv_b)), N, C,
                      3 * C);
  a.att = Tensor::uninitialized({B, NH, T, T});
  a.atty = Tensor::uninitialized({B, T, C});
  cpu::attention_forward(a.atty.f32(), a.att.f32(), a.qkv.f32(), B, T, C, NH);
}

Tensor AttentionHalf::forward_output(const Acts& a, std::int64_t B, std::int64_t T) const {
  const std::int64_t C = c_.d_model, N = B * T;
  Tensor res2 = Tensor::uninitialized({B, T, C});
  cpu::linear_forward(res2.f32(), a.atty.f32(), p_.w(in_half(proj_w)), p_.w(in_half(proj_b)), N, C,
                      C);
  cpu::residual_forward(res2.f32(), a.x.f32(), res2.f32(), N * C);
  return res2;
}

void AttentionHalf::drop_inner(Acts& a) const {
  a.ln1 = a.ln1_mean = a.ln1_rstd = a.qkv = a.att = a.atty = Tensor{};
}

Tensor AttentionHalf::backward_input(Acts& a, const Tensor& d_out, std::int64_t B,
                                     std::int64_t T) const {
  const std::int64_t C = c_.d_model, NH = c_.heads, N = B * T;
  a.d_out = d_out;  // read, never written
  Tensor d_atty = Tensor::uninitialized({B, T, C});
  cpu::linear_backward_input(d_atty.f32(), d_out.f32(), p_.w(in_half(proj_w)), N, C, C);
  a.d_qkv = Tensor::uninitialized({B, T, 3 * C});
  cpu::attention_backward_input(a.d_qkv.f32(), d_atty.f32(), a.qkv.f32(), a.att.f32(), B, T, C, NH);
  a.qkv = {};
  a.att = {};
  a.d_ln1 = Tensor::uninitialized({B, T, C});
  cpu::linear_backward_input(a.d_ln1.f32(), a.d_qkv.f32(), p_.w(in_half(qkv_w)), N, C, 3 * C);
  Tensor dx = d_out.clone();
  cpu::layernorm_backward_input(dx.f32(), a.d_ln1.f32(), a.x.f32(), p_.w(in_half(ln1_w)),
                                a.ln1_mean.f32(), a.ln1_rstd.f32(), N, C);
  return dx;
}

void AttentionHalf::backward_weight(const Acts& a, std::int64_t B, std::int64_t T) const {
  const std::int64_t C = c_.d_model, N = B * T;
  cpu::linear_backward_weight(p_.g(in_half(proj_w)), p_.g(in_half(proj_b)), a.d_out.f32(),
                              a.atty.f32(), N, C, C);
  cpu::linear_backward_weight(p_.g(in_half(qkv_w)), p_.g(in_half(qkv_b)), a.d_qkv.f32(),
                              a.ln1.f32(), N, C, 3 * C);
  cpu::layernorm_backward_weight(p_.g(in_half(ln1_w)), p_.g(in_half(ln1_b)), a.d_ln1.f32(),
                                 a.x.f32(), a.ln1_mean.f32(), a.ln1_rstd.f32(), N, C);
}

// --- MLP half

void MlpHalf::layout(const GptConfig& c, int b, std::vector<ParamLayout>& out) {
  const std::int64_t C = c.d_model, H = c.mlp_hidden();
  add_constant_param(out, block_param_name(b, "ln2.weight"), {C}, 1.0f);
  add_constant_param(out, block_param_name(b, "ln2.bias"), {C}, 0.0f);
  add_normal_param(out, block_param_name(b, "mlp.fc1.weight"), {H, C}, kInitStd, true);
  add_constant_param(out, block_param_name(b, "mlp.fc1.bias"), {H}, 0.0f);
  add_normal_param(out, block_param_name(b, "mlp.fc2.weight"), {C, H}, residual_init_std(c), true);
  add_constant_param(out, block_param_name(b, "mlp.fc2.bias"), {C}, 0.0f);
}

void MlpHalf::forward_inner(Acts& a, std::int64_t B, std::int64_t T) const {
  const std::int64_t C = c_.d_model, H = c_.mlp_hidden(), N = B * T;
  a.ln2 = Tensor::uninitialized({B, T, C});
  a.ln2_mean = Tensor::uninitialized({B, T});
  a.ln2_rstd = Tensor::uninitialized({B, T});
  cpu::layernorm_forward(a.ln2.f32(), a.ln2_mean.f32(), a.ln2_rstd.f32(), a.x.f32(),
                         p_.w(in_half(ln2_w)), p_.w(in_half(ln2_b)), N, C);
  a.fc1 = Tensor::uninitialized({B, T, H});
  cpu::linear_forward(a.fc1.f32(), a.ln2.f32(), p_.w(in_half(fc1_w)), p_.w(in_half(fc1_b)), N, C,
                      H);
  a.gelu = Tensor::uninitialized({B, T, H});
  cpu::gelu_forward(a.gelu.f32(), a.fc1.f32(), N * H);
}

Tensor MlpHalf::forward_output(const Acts& a, std::int64_t B, std::int64_t T) const {
  const std::int64_t C = c_.d_model, H = c_.mlp_hidden(), N = B * T;
  Tensor out = Tensor::uninitialized({B, T, C});
  cpu::linear_forward(out.f32(), a.gelu.f32(), p_.w(in_half(fc2_w)), p_.w(in_half(fc2_b)), N, H, C);
  cpu::residual_forward(out.f32(), a.x.f32(), out.f32(), N * C);
  return out;
}

void MlpHalf::drop_inner(Acts& a) const {
  a.ln2 = a.ln2_mean = a.ln2_rstd = a.fc1 = a.gelu = Tensor{};
}

Tensor MlpHalf::backward_input(Acts& a, const Tensor& d_out, std::int64_t B, std::int64_t T) const {
  const std::int64_t C = c_.d_model, H = c_.mlp_hidden(), N = B * T;
  a.d_out = d_out;  // read, never written
  a.d_fc1 = Tensor::uninitialized({B, T, H});
  cpu::linear_backward_input(a.d_fc1.f32(), d_out.f32(), p_.w(in_half(fc2_w)), N, H, C);
  cpu::gelu_backward_input(a.d_fc1.f32(), a.d_fc1.f32(), a.fc1.f32(), N * H);
  a.fc1 = {};
  a.d_ln2 = Tensor::uninitialized({B, T, C});
  cpu::linear_backward_input(a.d_ln2.f32(), a.d_fc1.f32(), p_.w(in_half(fc1_w)), N, C, H);
  Tensor dx = d_out.clone();
  cpu::layernorm_backward_input(dx.f32(), a.d_ln2.f32(), a.x.f32(), p_.w(in_half(ln2_w)),
                                a.ln2_mean.f32(), a.ln2_rstd.f32(), N, C);
  return dx;
}

void MlpHalf::backward_weight(const Acts& a, std::int64_t B, std::int64_t T) const {
  const std::int64_t C = c_.d_model, H = c_.mlp_hidden(), N = B * T;
  cpu::linear_backward_weight(p_.g(in_half(fc2_w)), p_.g(in_half(fc2_b)), a.d_out.f32(),
                              a.gelu.f32(), N, H, C);
  cpu::linear_backward_weight(p_.g(in_half(fc1_w)), p_.g(in_half(fc1_b)), a.d_fc1.f32(),
                              a.ln2.f32(), N, C, H);
  cpu::layernorm_backward_weight(p_.g(in_half(ln2_w)), p_.g(in_half(ln2_b)), a.d_ln2.f32(),
                                 a.x.f32(), a.ln2_mean.f32(), a.ln2_rstd.f32(), N, C);
}

// --- head: ln_f.weight, ln_f.bias, lm_head.weight

void Head::layout(const GptConfig& c, std::vector<ParamLayout>& out) {
  add_constant_param(out, "ln_f.weight", {c.d_model}, 1.0f);
  add_constant_param(out, "ln_f.bias", {c.d_model}, 0.0f);
  add_lm_head_param(out, c);
}

double Head::forward(const Tensor& x, const Tensor& targets, Acts& h, std::int64_t B,
                     std::int64_t T, Tensor* logits_out) const {
  const std::int64_t C = c_.d_model, N = B * T;
  h.targets = targets;
  h.x = x;
  h.lnf = Tensor::uninitialized({B, T, C});
  h.lnf_mean = Tensor::uninitialized({B, T});
  h.lnf_rstd = Tensor::uninitialized({B, T});
  cpu::layernorm_forward(h.lnf.f32(), h.lnf_mean.f32(), h.lnf_rstd.f32(), x.f32(), p_.w(0), p_.w(1),
                         N, C);
  return lm_head_forward(h.logits, h.lnf, h.targets, p_.w(2), B, T, C, c_.vocab, logits_out);
}

Tensor Head::backward_input(Acts& h, float loss_scale, std::int64_t B, std::int64_t T) const {
  const std::int64_t C = c_.d_model, N = B * T;
  h.d_lnf = lm_head_backward_input(h.logits, h.targets, p_.w(2), loss_scale, B, T, C, c_.vocab);
  Tensor dx = Tensor::zeros({B, T, C});  // zeros: layernorm_backward_input adds into it
  cpu::layernorm_backward_input(dx.f32(), h.d_lnf.f32(), h.x.f32(), p_.w(0), h.lnf_mean.f32(),
                                h.lnf_rstd.f32(), N, C);
  return dx;
}

void Head::backward_weight(const Acts& h, std::int64_t B, std::int64_t T) const {
  const std::int64_t C = c_.d_model, N = B * T;
  lm_head_backward_weight(p_.g(2), h.logits, h.lnf, B, T, C, c_.vocab);
  cpu::layernorm_backward_weight(p_.g(0), p_.g(1), h.d_lnf.f32(), h.x.f32(), h.lnf_mean.f32(),
                                 h.lnf_rstd.f32(), N, C);
}

}  // namespace conveyor::gpt2
