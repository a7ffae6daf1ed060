#include "kernels/cuda/model/llama_cuda_layers.hpp"

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/copy.hpp"
#include "kernels/cuda/embedding.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/rmsnorm.hpp"
#include "kernels/cuda/rotary.hpp"
#include "kernels/model/recompute.hpp"

namespace conveyor::cuda_llama {
namespace {

// Parameter positions within each layer (the order of llama_layers.cpp's layouts).
enum AttentionParam : std::size_t { attn_norm_w, qkv_w, o_w };
enum MlpParam : std::size_t { mlp_norm_w, gate_up_w, down_w };
enum HeadParam : std::size_t { norm_f_w };

}  // namespace

Layers::Layers(const CudaLayerContext& ctx) : ctx_(&ctx) {
  if (ctx.slice.num_blocks == 0) return;
  const llama::Context tables(ctx.config);  // (seq_len, hs/2) f32 on the host
  cos_ = to_device(tables.cos, ctx.device, ctx.stream);
  sin_ = to_device(tables.sin, ctx.device, ctx.stream);
}

std::int64_t Layers::qkv_width() const {
  const GptConfig& c = ctx_->config;
  return c.d_model + 2 * c.kv_head_count() * c.head_dim();
}

// ---- embedding: wte.weight (V, C)

Tensor Layers::embedding_forward(const Tensor& tokens, std::int64_t B, std::int64_t T) const {
  const CudaLayerContext& c = *ctx_;
  const std::int64_t C = c.config.d_model;
  Tensor x = c.alloc({B, T, C}, DType::bf16, "embedding output (B, T, C)");
  conveyor::embedding_forward(bf(x), i32(tokens), c.embedding().w(0), nullptr, int(B), int(T),
                              int(C), c.stream);
  return x;
}

template <class G>
void Layers::embedding_backward_weight(const Tensor& d_embed, const Tensor& tokens,
                                       std::int64_t B, std::int64_t T, cudaStream_t s) const {
  conveyor::embedding_backward_weight(ctx_->embedding().g<G>(0), static_cast<G*>(nullptr),
                                      bf(d_embed), i32(tokens), int(B), int(T),
                                      int(ctx_->config.d_model), int(ctx_->config.vocab), s);
}

// ---- blocks

// attn_norm, qkv, rotary and attention of block j: fills xn, rstd, qkv (rotated), lse and
// atty. The input is a.x, or res_a + res_b when res_a is defined (then a.x is formed here).
void Layers::attention_half(int j, BlockActs& a, const Tensor& res_a, const Tensor& res_b,
                            std::int64_t B, std::int64_t T) const {
  const CudaLayerContext& c = *ctx_;
  const GptConfig& m = c.config;
  const std::int64_t C = m.d_model, NH = m.heads, NKV = m.kv_head_count(), W = qkv_width();
  const int n = static_cast<int>(B * T), cc = static_cast<int>(C);
  const float eps = static_cast<float>(m.norm_eps);
  const CudaLayerParams p = c.attention(j);
  a.xn = c.alloc({B, T, C}, DType::bf16, "attn_norm output (B, T, C)");
  a.rstd = c.alloc({B, T}, DType::f32, "attn_norm rstd (B, T)");
  if (res_a.defined()) {
    a.x = c.alloc({B, T, C}, DType::bf16, "block input (B, T, C)");
    residual_rmsnorm_forward(bf(a.x), bf(a.xn), f32(a.rstd), bf(res_a), bf(res_b),
                             p.w(attn_norm_w), eps, n, cc, c.stream);
  } else {
    rmsnorm_forward(bf(a.xn), f32(a.rstd), bf(a.x), p.w(attn_norm_w), eps, n, cc, c.stream);
  }
  a.qkv = c.alloc({B, T, W}, DType::bf16, "attention qkv (B, T, (NH + 2 NKV) hs)");
  ctx_->linear().forward(bf(a.qkv), nullptr, bf(a.xn), p.index(qkv_w), nullptr, n, cc, int(W),
                         &a.qkv_fp8);
  // q and k side by side at the row's start: one pass rotates both.
  rotary_forward(bf(a.qkv), f32(cos_), f32(sin_), int(B), int(T), int(NH + NKV),
                 int(m.head_dim()), W, c.stream);
  a.lse = c.alloc({B, NH, T}, DType::f32, "attention logsumexp (B, NH, T)");
  a.atty = c.alloc({B, T, C}, DType::bf16, "attention output (B, T, C)");
  gqa_attention_forward(bf(a.atty), f32(a.lse), bf(a.qkv), int(B), int(T), cc, int(NH), int(NKV),
                        c.stream);
}

// attn.o of block j from a.atty: the attention half's output is a.x + that (res2).
Tensor Layers::attention_out(int j, BlockActs& a, std::int64_t B, std::int64_t T) const {
  const CudaLayerContext& c = *ctx_;
  const std::int64_t C = c.config.d_model;
  const int n = static_cast<int>(B * T), cc = static_cast<int>(C);
  Tensor o = c.alloc({B, T, C}, DType::bf16, "attention o projection (B, T, C)");
  ctx_->linear().forward(bf(o), nullptr, bf(a.atty), c.attention(j).index(o_w), nullptr, n, cc, cc,
                         &a.o_fp8);
  return o;
}

// mlp_norm, gate_up and SwiGLU of block j: fills xn2, rstd2, gate_up and h. With the
// attention half, res2 = a.x + attn.o(a.atty) is formed by mlp_norm's kernel.
void Layers::mlp_half(int j, BlockActs& a, std::int64_t B, std::int64_t T) const {
  const CudaLayerContext& c = *ctx_;
  const std::int64_t C = c.config.d_model, F = c.config.llama_ffn_dim();
  const int n = static_cast<int>(B * T), cc = static_cast<int>(C);
  const float eps = static_cast<float>(c.config.norm_eps);
  const CudaLayerParams p = c.mlp(j);
  a.xn2 = c.alloc({B, T, C}, DType::bf16, "mlp_norm output (B, T, C)");
  a.rstd2 = c.alloc({B, T}, DType::f32, "mlp_norm rstd (B, T)");
  if (c.has_attention(j)) {
    const Tensor o = attention_out(j, a, B, T);
    a.res2 = c.alloc({B, T, C}, DType::bf16, "attention residual (B, T, C)");
    residual_rmsnorm_forward(bf(a.res2), bf(a.xn2), f32(a.rstd2), bf(a.x), bf(o),
                             p.w(mlp_norm_w), eps, n, cc, c.stream);
  } else {
    rmsnorm_forward(bf(a.xn2), f32(a.rstd2), bf(a.res2), p.w(mlp_norm_w), eps, n, cc, c.stream);
  }
  a.gate_up = c.alloc({B, T, 2 * F}, DType::bf16, "mlp gate_up (B, T, 2F)");
  ctx_->linear().forward(bf(a.gate_up), nullptr, bf(a.xn2), p.index(gate_up_w), nullptr, n, cc,
                         int(2 * F), &a.gate_up_fp8);
  a.h = c.alloc({B, T, F}, DType::bf16, "mlp SwiGLU output (B, T, F)");
  // FP8: SwiGLU makes down's input codes; only down reads a.h
  const Fp8Next down_input{p.index(down_w), false, &a.down_fp8, /*only_reader=*/true};
  ctx_->linear().produce({Fp8Producer::Op::swiglu, bf(a.h), bf(a.gate_up)}, n, int(F), &down_input);
}

Tensor Layers::mlp_out(int j, BlockActs& a, std::int64_t B, std::int64_t T) const {
  const CudaLayerContext& c = *ctx_;
  const std::int64_t C = c.config.d_model, F = c.config.llama_ffn_dim();
  const int n = static_cast<int>(B * T), cc = static_cast<int>(C);
  Tensor down = c.alloc({B, T, C}, DType::bf16, "mlp output (B, T, C)");
  ctx_->linear().forward(bf(down), nullptr, bf(a.h), c.mlp(j).index(down_w), nullptr, n, int(F),
                         cc, &a.down_fp8);
  return down;
}

// The FP8 codes kept of a dropped input go too (gpt2_cuda_layers.cpp says why).
void Layers::drop_recomputed(int j, BlockActs& a) const {
  if (recomputes_attention(ctx_->config.recompute)) {
    a.xn = a.rstd = a.qkv = a.lse = a.atty = Tensor{};
    a.qkv_fp8.reset();
    a.o_fp8.reset();
  }
  if (recomputes_mlp(ctx_->config.recompute)) {
    if (ctx_->has_attention(j)) a.res2 = Tensor{};
    a.xn2 = a.rstd2 = a.gate_up = a.h = Tensor{};
    a.gate_up_fp8.reset();
    a.down_fp8.reset();
  }
}

Tensor Layers::mlp_half_backward_input(int j, BlockActs& a, const Tensor& d_out, std::int64_t B,
                                       std::int64_t T) const {
  const CudaLayerContext& c = *ctx_;
  const std::int64_t C = c.config.d_model, F = c.config.llama_ffn_dim();
  const int n = static_cast<int>(B * T), cc = static_cast<int>(C);
  const CudaLayerParams p = c.mlp(j);
  a.d_out = d_out;
  Tensor d_h = c.alloc({B, T, F}, DType::bf16, "d mlp SwiGLU output (B, T, F)");
  ctx_->linear().backward_input(bf(d_h), bf(d_out), p.index(down_w), nullptr, n, int(F), cc,
                                &a.down_fp8);
  a.d_gate_up = c.alloc({B, T, 2 * F}, DType::bf16, "d mlp gate_up (B, T, 2F)");
  // FP8: SwiGLU's backward makes gate_up's output-gradient codes; only gate_up reads them
  // (no bias)
  const Fp8Next gate_up_grad{p.index(gate_up_w), true, &a.gate_up_fp8, /*only_reader=*/true};
  ctx_->linear().produce({Fp8Producer::Op::swiglu_backward, bf(a.d_gate_up), bf(d_h), bf(a.gate_up)},
                         n, int(2 * F), &gate_up_grad);
  a.gate_up = {};
  a.d_xn2 = c.alloc({B, T, C}, DType::bf16, "d mlp_norm output (B, T, C)");
  ctx_->linear().backward_input(bf(a.d_xn2), bf(a.d_gate_up), p.index(gate_up_w), nullptr, n, cc,
                                int(2 * F), &a.gate_up_fp8);
  Tensor d_res2 = c.alloc({B, T, C}, DType::bf16, "d attention residual (B, T, C)");
  rmsnorm_backward_input_residual(bf(d_res2), bf(d_out), bf(a.d_xn2), bf(a.res2), p.w(mlp_norm_w),
                                  f32(a.rstd2), n, cc, c.stream);
  return d_res2;
}

Tensor Layers::attention_half_backward_input(int j, BlockActs& a, const Tensor& d_res2,
                                             std::int64_t B, std::int64_t T) const {
  const CudaLayerContext& c = *ctx_;
  const GptConfig& m = c.config;
  const std::int64_t C = m.d_model, NH = m.heads, NKV = m.kv_head_count(), W = qkv_width();
  const int n = static_cast<int>(B * T), cc = static_cast<int>(C);
  const CudaLayerParams p = c.attention(j);
  a.d_res2 = d_res2;
  Tensor d_atty = c.alloc({B, T, C}, DType::bf16, "d attention output (B, T, C)");
  ctx_->linear().backward_input(bf(d_atty), bf(d_res2), p.index(o_w), nullptr, n, cc, cc, &a.o_fp8);
  a.d_qkv = c.alloc({B, T, W}, DType::bf16, "d attention qkv (B, T, (NH + 2 NKV) hs)");
  gqa_attention_backward_input(bf(a.d_qkv), bf(d_atty), bf(a.qkv), bf(a.atty), f32(a.lse),
                               int(B), int(T), cc, int(NH), int(NKV), c.stream);
  a.qkv = {};
  a.lse = {};
  // d(projection output) = the inverse rotation of d(rotated q, k); v's part is untouched.
  rotary_backward(bf(a.d_qkv), f32(cos_), f32(sin_), int(B), int(T), int(NH + NKV),
                  int(m.head_dim()), W, c.stream);
  a.d_xn = c.alloc({B, T, C}, DType::bf16, "d attn_norm output (B, T, C)");
  ctx_->linear().backward_input(bf(a.d_xn), bf(a.d_qkv), p.index(qkv_w), nullptr, n, cc, int(W),
                                &a.qkv_fp8);
  Tensor dx = c.alloc({B, T, C}, DType::bf16, "d block input (B, T, C)");
  rmsnorm_backward_input_residual(bf(dx), bf(d_res2), bf(a.d_xn), bf(a.x), p.w(attn_norm_w),
                                  f32(a.rstd), n, cc, c.stream);
  return dx;
}

template <class G>
void Layers::mlp_half_backward_weight(int j, const BlockActs& a, std::int64_t B, std::int64_t T,
                                      cudaStream_t s) const {
  const int n = static_cast<int>(B * T), cc = static_cast<int>(ctx_->config.d_model),
            f = static_cast<int>(ctx_->config.llama_ffn_dim());
  const CudaLayerParams p = ctx_->mlp(j);
  ctx_->linear().backward_weight<G>(p.index(down_w), static_cast<G*>(nullptr), bf(a.d_out), bf(a.h),
                                    n, f, cc, s, &a.down_fp8);
  ctx_->linear().backward_weight<G>(p.index(gate_up_w), static_cast<G*>(nullptr), bf(a.d_gate_up),
                                    bf(a.xn2), n, cc, 2 * f, s, &a.gate_up_fp8);
  rmsnorm_backward_weight(p.g<G>(mlp_norm_w), bf(a.d_xn2), bf(a.res2), f32(a.rstd2), n, cc, s);
}

template <class G>
void Layers::attention_half_backward_weight(int j, const BlockActs& a, std::int64_t B,
                                            std::int64_t T, cudaStream_t s) const {
  const int n = static_cast<int>(B * T), cc = static_cast<int>(ctx_->config.d_model),
            w = static_cast<int>(qkv_width());
  const CudaLayerParams p = ctx_->attention(j);
  ctx_->linear().backward_weight<G>(p.index(o_w), static_cast<G*>(nullptr), bf(a.d_res2),
                                    bf(a.atty), n, cc, cc, s, &a.o_fp8);
  ctx_->linear().backward_weight<G>(p.index(qkv_w), static_cast<G*>(nullptr), bf(a.d_qkv), bf(a.xn),
                                    n, cc, w, s, &a.qkv_fp8);
  rmsnorm_backward_weight(p.g<G>(attn_norm_w), bf(a.d_xn), bf(a.x), f32(a.rstd), n, cc, s);
}

// ---- the final norm: norm_f.weight (then lm_head.weight, the skeleton's)

void Layers::final_norm_forward(CudaHeadActs& h, const Tensor& x, const Tensor& res_a,
                                const Tensor& res_b, std::int64_t B, std::int64_t T) const {
  const CudaLayerContext& c = *ctx_;
  const std::int64_t C = c.config.d_model;
  const int n = static_cast<int>(B * T), cc = static_cast<int>(C);
  const float eps = static_cast<float>(c.config.norm_eps);
  const bf16* w = c.head().w(norm_f_w);
  h.lnf = c.alloc({B, T, C}, DType::bf16, "norm_f output (B, T, C)");
  h.lnf_rstd = c.alloc({B, T}, DType::f32, "norm_f rstd (B, T)");
  if (res_a.defined()) {
    h.x = c.alloc({B, T, C}, DType::bf16, "norm_f input (B, T, C)");
    residual_rmsnorm_forward(bf(h.x), bf(h.lnf), f32(h.lnf_rstd), bf(res_a), bf(res_b), w, eps,
                             n, cc, c.stream);
  } else {
    h.x = x;
    rmsnorm_forward(bf(h.lnf), f32(h.lnf_rstd), bf(h.x), w, eps, n, cc, c.stream);
  }
}

Tensor Layers::final_norm_backward_input(const CudaHeadActs& h, std::int64_t B,
                                         std::int64_t T) const {
  const CudaLayerContext& c = *ctx_;
  const std::int64_t C = c.config.d_model;
  const int n = static_cast<int>(B * T), cc = static_cast<int>(C);
  Tensor dx = c.zeros({B, T, C}, DType::bf16, "d norm_f input (B, T, C)");  // += below
  rmsnorm_backward_input(bf(dx), bf(h.d_lnf), bf(h.x), c.head().w(norm_f_w), f32(h.lnf_rstd), n,
                         cc, c.stream);
  return dx;
}

template <class G>
void Layers::final_norm_backward_weight(const CudaHeadActs& h, std::int64_t B, std::int64_t T,
                                        cudaStream_t s) const {
  const int n = static_cast<int>(B * T), cc = static_cast<int>(ctx_->config.d_model);
  rmsnorm_backward_weight(ctx_->head().g<G>(norm_f_w), bf(h.d_lnf), bf(h.x), f32(h.lnf_rstd), n,
                          cc, s);
}

// The gradient types of optim.grad_dtype.
CONVEYOR_CUDA_LAYERS_GRADIENTS(Layers, float)
CONVEYOR_CUDA_LAYERS_GRADIENTS(Layers, bf16)

}  // namespace conveyor::cuda_llama
