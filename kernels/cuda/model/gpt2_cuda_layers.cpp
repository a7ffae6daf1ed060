#include "kernels/cuda/model/gpt2_cuda_layers.hpp"

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/embedding.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/layernorm.hpp"
#include "kernels/model/block_params.hpp"
#include "kernels/model/recompute.hpp"

namespace conveyor::cuda_gpt2 {
namespace {

// A block parameter's position within its half's layout (block_params.hpp's order, which
// gpt2_layers.cpp declares).
constexpr std::size_t in_half(BlockParam k) { return k % kParamsPerHalf; }
enum HeadParam : std::size_t { lnf_w, lnf_b };

}  // namespace

// ---- embedding: wte.weight (V, C), wpe.weight (maxT, C)

Tensor Layers::embedding_forward(const Tensor& tokens, std::int64_t B, std::int64_t T) const {
  const CudaLayerContext& c = *ctx_;
  const std::int64_t C = c.config.d_model;
  Tensor x = c.alloc({B, T, C}, DType::bf16, "embedding output (B, T, C)");
  const CudaLayerParams p = c.embedding();
  conveyor::embedding_forward(bf(x), i32(tokens), p.w(0), p.w(1), int(B), int(T), int(C),
                              c.stream);
  return x;
}

template <class G>
void Layers::embedding_backward_weight(const Tensor& d_embed, const Tensor& tokens,
                                       std::int64_t B, std::int64_t T, cudaStream_t s) const {
  const CudaLayerParams p = ctx_->embedding();
  conveyor::embedding_backward_weight(p.g<G>(0), p.g<G>(1), bf(d_embed), i32(tokens), int(B),
                                      int(T), int(ctx_->config.d_model),
                                      int(ctx_->config.vocab), s);
}

// ---- blocks

// ln1, qkv and attention of block j: fills ln1 (and its statistics), qkv, lse and atty.
// The input is a.x, or res_a + res_b when res_a is defined (then a.x is formed here, by
// ln1's kernel: the same bits as a separate add).
void Layers::attention_half(int j, BlockActs& a, const Tensor& res_a, const Tensor& res_b,
                            std::int64_t B, std::int64_t T) const {
  const CudaLayerContext& c = *ctx_;
  const std::int64_t C = c.config.d_model, NH = c.config.heads;
  const int n = static_cast<int>(B * T), cc = static_cast<int>(C);
  const CudaLayerParams p = c.attention(j);
  a.ln1 = c.alloc({B, T, C}, DType::bf16, "ln1 output (B, T, C)");
  a.ln1_mean = c.alloc({B, T}, DType::f32, "ln1 mean (B, T)");
  a.ln1_rstd = c.alloc({B, T}, DType::f32, "ln1 rstd (B, T)");
  if (res_a.defined()) {
    a.x = c.alloc({B, T, C}, DType::bf16, "block input (B, T, C)");
    residual_layernorm_forward(bf(a.x), bf(a.ln1), f32(a.ln1_mean), f32(a.ln1_rstd), bf(res_a),
                               bf(res_b), p.w(in_half(ln1_w)), p.w(in_half(ln1_b)), n, cc,
                               c.stream);
  } else {
    layernorm_forward(bf(a.ln1), f32(a.ln1_mean), f32(a.ln1_rstd), bf(a.x), p.w(in_half(ln1_w)),
                      p.w(in_half(ln1_b)), n, cc, c.stream);
  }
  a.qkv = c.alloc({B, T, 3 * C}, DType::bf16, "attention qkv (B, T, 3C)");
  ctx_->linear().forward(bf(a.qkv), nullptr, bf(a.ln1), p.index(in_half(qkv_w)),
                         p.w(in_half(qkv_b)), n, cc, 3 * cc, &a.qkv_fp8);
  a.lse = c.alloc({B, NH, T}, DType::f32, "attention logsumexp (B, NH, T)");
  a.atty = c.alloc({B, T, C}, DType::bf16, "attention output (B, T, C)");
  attention_forward(bf(a.atty), f32(a.lse), bf(a.qkv), int(B), int(T), cc, int(NH), c.stream);
}

// attn.proj of block j from a.atty: the attention half's output is a.x + that (res2).
// Not stashed: backward needs only its gradient, which is res2's.
Tensor Layers::attention_out(int j, BlockActs& a, std::int64_t B, std::int64_t T) const {
  const CudaLayerContext& c = *ctx_;
  const std::int64_t C = c.config.d_model;
  const int n = static_cast<int>(B * T), cc = static_cast<int>(C);
  const CudaLayerParams p = c.attention(j);
  Tensor proj = c.alloc({B, T, C}, DType::bf16, "attention projection (B, T, C)");
  ctx_->linear().forward(bf(proj), nullptr, bf(a.atty), p.index(in_half(proj_w)),
                         p.w(in_half(proj_b)), n, cc, cc, &a.proj_fp8);
  return proj;
}

// ln2, fc1 and GELU of block j: fills ln2 (and its statistics), pre_gelu and gelu. With the
// attention half, res2 = a.x + attn.proj(a.atty) is formed by ln2's kernel (and stored in
// a.res2); a lone MLP half normalises a.res2, its input, with the plain LayerNorm: the same
// bits as the fused kernel.
void Layers::mlp_half(int j, BlockActs& a, std::int64_t B, std::int64_t T) const {
  const CudaLayerContext& c = *ctx_;
  const std::int64_t C = c.config.d_model, H = c.config.mlp_hidden();
  const int n = static_cast<int>(B * T), cc = static_cast<int>(C), h = static_cast<int>(H);
  const CudaLayerParams p = c.mlp(j);
  a.ln2 = c.alloc({B, T, C}, DType::bf16, "ln2 output (B, T, C)");
  a.ln2_mean = c.alloc({B, T}, DType::f32, "ln2 mean (B, T)");
  a.ln2_rstd = c.alloc({B, T}, DType::f32, "ln2 rstd (B, T)");
  if (c.has_attention(j)) {
    const Tensor proj = attention_out(j, a, B, T);
    a.res2 = c.alloc({B, T, C}, DType::bf16, "attention residual (B, T, C)");
    residual_layernorm_forward(bf(a.res2), bf(a.ln2), f32(a.ln2_mean), f32(a.ln2_rstd), bf(a.x),
                               bf(proj), p.w(in_half(ln2_w)), p.w(in_half(ln2_b)), n, cc,
                               c.stream);
  } else {
    layernorm_forward(bf(a.ln2), f32(a.ln2_mean), f32(a.ln2_rstd), bf(a.res2),
                      p.w(in_half(ln2_w)), p.w(in_half(ln2_b)), n, cc, c.stream);
  }
  a.pre_gelu = c.alloc({B, T, H}, DType::bf16, "mlp pre-GELU (B, T, 4C)");
  a.gelu = c.alloc({B, T, H}, DType::bf16, "mlp GELU output (B, T, 4C)");
  // FP8: GELU makes fc2's input codes; nothing else reads a.gelu (fc2's weight gradient reads
  // the kept codes), so under delayed scaling they are all GELU writes
  const Fp8Next fc2_input{p.index(in_half(fc2_w)), false, &a.fc2_fp8, /*only_reader=*/true};
  ctx_->linear().forward(bf(a.gelu), bf(a.pre_gelu), bf(a.ln2), p.index(in_half(fc1_w)),
                         p.w(in_half(fc1_b)), n, cc, h, &a.fc1_fp8, &fc2_input);
}

// mlp.fc2 of block j from a.gelu: the block's output is a.res2 + that. Never recomputed
// (backward does not read it).
Tensor Layers::mlp_out(int j, BlockActs& a, std::int64_t B, std::int64_t T) const {
  const CudaLayerContext& c = *ctx_;
  const std::int64_t C = c.config.d_model, H = c.config.mlp_hidden();
  const int n = static_cast<int>(B * T), cc = static_cast<int>(C), h = static_cast<int>(H);
  const CudaLayerParams p = c.mlp(j);
  Tensor fc2 = c.alloc({B, T, C}, DType::bf16, "mlp output (B, T, C)");
  ctx_->linear().forward(bf(fc2), nullptr, bf(a.gelu), p.index(in_half(fc2_w)), p.w(in_half(fc2_b)),
                         n, h, cc, &a.fc2_fp8);
  return fc2;
}

// Released in stream order (the allocator's rule), so after the launches that read them. A
// lone MLP half keeps res2 under `full`: it is the block's input there, as x is elsewhere.
// The FP8 codes kept of a dropped input go too (the point is the memory); a recomputed pass
// keeps them again, and what no recomputed pass makes (fc2's input) backward_weight casts.
void Layers::drop_recomputed(int j, BlockActs& a) const {
  if (recomputes_attention(ctx_->config.recompute)) {
    a.ln1 = a.ln1_mean = a.ln1_rstd = a.qkv = a.lse = a.atty = Tensor{};
    a.qkv_fp8.reset();
    a.proj_fp8.reset();
  }
  if (recomputes_mlp(ctx_->config.recompute)) {
    if (ctx_->has_attention(j)) a.res2 = Tensor{};
    a.ln2 = a.ln2_mean = a.ln2_rstd = a.pre_gelu = a.gelu = Tensor{};
    a.fc1_fp8.reset();
    a.fc2_fp8.reset();
  }
}

Tensor Layers::mlp_half_backward_input(int j, BlockActs& a, const Tensor& d_out, std::int64_t B,
                                       std::int64_t T) const {
  const CudaLayerContext& c = *ctx_;
  const std::int64_t C = c.config.d_model, H = c.config.mlp_hidden();
  const int n = static_cast<int>(B * T), cc = static_cast<int>(C), h = static_cast<int>(H);
  const CudaLayerParams p = c.mlp(j);
  a.d_out = d_out;
  a.d_fc1 = c.alloc({B, T, H}, DType::bf16, "d mlp pre-GELU (B, T, 4C)");
  // FP8: GELU's backward makes fc1's output-gradient codes; fc1's bias gradient reads a.d_fc1
  const Fp8Next fc1_grad{p.index(in_half(fc1_w)), true, &a.fc1_fp8, /*only_reader=*/false};
  ctx_->linear().backward_input(bf(a.d_fc1), bf(d_out), p.index(in_half(fc2_w)), bf(a.pre_gelu), n,
                                h, cc, &a.fc2_fp8, &fc1_grad);
  a.pre_gelu = {};
  a.d_ln2 = c.alloc({B, T, C}, DType::bf16, "d ln2 output (B, T, C)");
  ctx_->linear().backward_input(bf(a.d_ln2), bf(a.d_fc1), p.index(in_half(fc1_w)), nullptr, n, cc,
                                h, &a.fc1_fp8);
  Tensor d_res2 = c.alloc({B, T, C}, DType::bf16, "d attention residual (B, T, C)");
  layernorm_backward_input_residual(bf(d_res2), bf(d_out), bf(a.d_ln2), bf(a.res2),
                                    p.w(in_half(ln2_w)), f32(a.ln2_mean), f32(a.ln2_rstd), n, cc,
                                    c.stream);
  return d_res2;
}

Tensor Layers::attention_half_backward_input(int j, BlockActs& a, const Tensor& d_res2,
                                             std::int64_t B, std::int64_t T) const {
  const CudaLayerContext& c = *ctx_;
  const std::int64_t C = c.config.d_model, NH = c.config.heads;
  const int n = static_cast<int>(B * T), cc = static_cast<int>(C);
  const CudaLayerParams p = c.attention(j);
  a.d_res2 = d_res2;
  Tensor d_atty = c.alloc({B, T, C}, DType::bf16, "d attention output (B, T, C)");
  ctx_->linear().backward_input(bf(d_atty), bf(d_res2), p.index(in_half(proj_w)), nullptr, n, cc,
                                cc, &a.proj_fp8);
  a.d_qkv = c.alloc({B, T, 3 * C}, DType::bf16, "d attention qkv (B, T, 3C)");
  attention_backward_input(bf(a.d_qkv), bf(d_atty), bf(a.qkv), bf(a.atty), f32(a.lse), int(B),
                           int(T), cc, int(NH), c.stream);
  a.qkv = {};
  a.lse = {};
  a.d_ln1 = c.alloc({B, T, C}, DType::bf16, "d ln1 output (B, T, C)");
  ctx_->linear().backward_input(bf(a.d_ln1), bf(a.d_qkv), p.index(in_half(qkv_w)), nullptr, n, cc,
                                3 * cc, &a.qkv_fp8);
  Tensor dx = c.alloc({B, T, C}, DType::bf16, "d block input (B, T, C)");
  layernorm_backward_input_residual(bf(dx), bf(d_res2), bf(a.d_ln1), bf(a.x), p.w(in_half(ln1_w)),
                                    f32(a.ln1_mean), f32(a.ln1_rstd), n, cc, c.stream);
  return dx;
}

template <class G>
void Layers::mlp_half_backward_weight(int j, const BlockActs& a, std::int64_t B, std::int64_t T,
                                      cudaStream_t s) const {
  const int n = static_cast<int>(B * T), cc = static_cast<int>(ctx_->config.d_model),
            h = static_cast<int>(ctx_->config.mlp_hidden());
  const CudaLayerParams p = ctx_->mlp(j);
  ctx_->linear().backward_weight<G>(p.index(in_half(fc2_w)), p.g<G>(in_half(fc2_b)), bf(a.d_out),
                                    bf(a.gelu), n, h, cc, s, &a.fc2_fp8);
  ctx_->linear().backward_weight<G>(p.index(in_half(fc1_w)), p.g<G>(in_half(fc1_b)), bf(a.d_fc1),
                                    bf(a.ln2), n, cc, h, s, &a.fc1_fp8);
  layernorm_backward_weight(p.g<G>(in_half(ln2_w)), p.g<G>(in_half(ln2_b)), bf(a.d_ln2),
                            bf(a.res2), f32(a.ln2_mean), f32(a.ln2_rstd), n, cc, s);
}

template <class G>
void Layers::attention_half_backward_weight(int j, const BlockActs& a, std::int64_t B,
                                            std::int64_t T, cudaStream_t s) const {
  const int n = static_cast<int>(B * T), cc = static_cast<int>(ctx_->config.d_model);
  const CudaLayerParams p = ctx_->attention(j);
  ctx_->linear().backward_weight<G>(p.index(in_half(proj_w)), p.g<G>(in_half(proj_b)), bf(a.d_res2),
                                    bf(a.atty), n, cc, cc, s, &a.proj_fp8);
  ctx_->linear().backward_weight<G>(p.index(in_half(qkv_w)), p.g<G>(in_half(qkv_b)), bf(a.d_qkv),
                                    bf(a.ln1), n, cc, 3 * cc, s, &a.qkv_fp8);
  layernorm_backward_weight(p.g<G>(in_half(ln1_w)), p.g<G>(in_half(ln1_b)), bf(a.d_ln1), bf(a.x),
                            f32(a.ln1_mean), f32(a.ln1_rstd), n, cc, s);
}

// ---- the final norm: ln_f.weight, ln_f.bias (then lm_head.weight, the skeleton's)

void Layers::final_norm_forward(CudaHeadActs& h, const Tensor& x, const Tensor& res_a,
                                const Tensor& res_b, std::int64_t B, std::int64_t T) const {
  const CudaLayerContext& c = *ctx_;
  const std::int64_t C = c.config.d_model;
  const int n = static_cast<int>(B * T), cc = static_cast<int>(C);
  const CudaLayerParams p = c.head();
  h.lnf = c.alloc({B, T, C}, DType::bf16, "ln_f output (B, T, C)");
  h.lnf_mean = c.alloc({B, T}, DType::f32, "ln_f mean (B, T)");
  h.lnf_rstd = c.alloc({B, T}, DType::f32, "ln_f rstd (B, T)");
  if (res_a.defined()) {
    h.x = c.alloc({B, T, C}, DType::bf16, "ln_f input (B, T, C)");
    residual_layernorm_forward(bf(h.x), bf(h.lnf), f32(h.lnf_mean), f32(h.lnf_rstd), bf(res_a),
                               bf(res_b), p.w(lnf_w), p.w(lnf_b), n, cc, c.stream);
  } else {
    h.x = x;
    layernorm_forward(bf(h.lnf), f32(h.lnf_mean), f32(h.lnf_rstd), bf(h.x), p.w(lnf_w),
                      p.w(lnf_b), n, cc, c.stream);
  }
}

Tensor Layers::final_norm_backward_input(const CudaHeadActs& h, std::int64_t B,
                                         std::int64_t T) const {
  const CudaLayerContext& c = *ctx_;
  const std::int64_t C = c.config.d_model;
  const int n = static_cast<int>(B * T), cc = static_cast<int>(C);
  Tensor dx = c.zeros({B, T, C}, DType::bf16, "d ln_f input (B, T, C)");
  layernorm_backward_input(bf(dx), bf(h.d_lnf), bf(h.x), c.head().w(lnf_w), f32(h.lnf_mean),
                           f32(h.lnf_rstd), n, cc, c.stream);
  return dx;
}

template <class G>
void Layers::final_norm_backward_weight(const CudaHeadActs& h, std::int64_t B, std::int64_t T,
                                        cudaStream_t s) const {
  const int n = static_cast<int>(B * T), cc = static_cast<int>(ctx_->config.d_model);
  const CudaLayerParams p = ctx_->head();
  layernorm_backward_weight(p.g<G>(lnf_w), p.g<G>(lnf_b), bf(h.d_lnf), bf(h.x), f32(h.lnf_mean),
                            f32(h.lnf_rstd), n, cc, s);
}

// The gradient types of optim.grad_dtype.
CONVEYOR_CUDA_LAYERS_GRADIENTS(Layers, float)
CONVEYOR_CUDA_LAYERS_GRADIENTS(Layers, bf16)

}  // namespace conveyor::cuda_gpt2
