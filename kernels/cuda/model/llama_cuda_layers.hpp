#pragma once
// Llama's layers on one GPU, as the CUDA stage skeleton composes them (cuda_stage_model.cpp;
// the CPU's are kernels/model/llama_layers.hpp, whose layouts give the parameters and whose
// maths these follow in bf16 with fp32 accumulation):
//   Embedding  wte[token]                        (no position embedding)
//   Block      attention half  x_j -> attn_norm -> qkv -> rotary(q, k) -> GQA -> o
//              MLP half        [res2 = x_j + o] mlp_norm -> gate_up -> SwiGLU -> down
//              x_{j+1} = res2 + down is formed by the next block's attn_norm (or norm_f) in
//              the same kernel (residual_rmsnorm_forward), as GPT-2's LayerNorms do.
//   Final norm norm_f (RMSNorm), fused with the last block's residual add.
// The rotary embedding is applied in place to the q and k parts of the fused qkv row in one
// pass (rotary.hpp: H = heads + kv_heads) right after the projection, so attention reads the
// rotated qkv and the stash holds only it; its backward rotates d_qkv back in place before
// the projection's backward. The rotary tables (seq_len, hs/2) fp32 are uploaded once per
// model (kernels/model/llama_layers.hpp's Context computes them in double).
// Half-block cuts and model.recompute behave as GPT-2's (gpt2_cuda_layers.hpp).
//
// Memory of one micro-batch's stash, per block and token, W = (NH + 2 NKV) hs the qkv width
// and F the MLP width: after forward x, xn, atty, res2, xn2 (5C bf16), qkv (W), gate_up
// (2F) and h (F), 2 floats of RMSNorm statistics and NH floats of logsumexp.
// backward_input frees qkv, the logsumexp and gate_up and adds d_out, d_xn2, d_res2, d_xn
// (4C), d_qkv (W) and d_gate_up (2F).
#include <array>
#include <cstdint>
#include <utility>

#include "kernels/cuda/model/cuda_layer_context.hpp"
#include "kernels/model/llama_layers.hpp"

namespace conveyor::cuda_llama {

// What one block keeps between forward, backward_input and backward_weight (device).
struct BlockActs {
  // forward
  Tensor x;          // (B, T, C) bf16 block input, the residual stream
  Tensor xn, rstd;   // (B, T, C) bf16 attn_norm output, (B, T) f32
  Tensor qkv;        // (B, T, W) bf16, q and k rotated; freed by backward_input
  Tensor lse;        // (B, NH, T) f32 attention logsumexp; freed by backward_input
  Tensor atty;       // (B, T, C) bf16 attention output, input of attn.o
  Tensor res2;       // (B, T, C) bf16 x + attn.o(atty); a lone MLP half's input
  Tensor xn2, rstd2; // (B, T, C) bf16 mlp_norm output, (B, T) f32
  Tensor gate_up;    // (B, T, 2F) bf16 rows [gate | up]; freed by backward_input
  Tensor h;          // (B, T, F) bf16 silu(gate) * up, input of mlp.down
  // backward_input, for backward_weight
  Tensor d_out;      // (B, T, C) gradient of the block output
  Tensor d_gate_up;  // (B, T, 2F)
  Tensor d_xn2;      // (B, T, C)
  Tensor d_res2;     // (B, T, C)
  Tensor d_qkv;      // (B, T, W) gradient of attn.qkv's output (rotated back)
  Tensor d_xn;       // (B, T, C)
  // precision.matmul fp8: each linear's input and output gradient as its weight gradient
  // reads them (transposed FP8 codes of xn, atty, xn2, h and of d_qkv, d_res2, d_gate_up,
  // d_out), kept from the casts forward and backward_input made.
  LinearFp8Keep qkv_fp8, o_fp8, gate_up_fp8, down_fp8;

  // What only the MLP half's weight gradients read, once its input gradient is done.
  void release_mlp_half() {
    for (Tensor* t : {&d_out, &h, &d_gate_up, &xn2, &rstd2, &d_xn2, &res2}) *t = {};
    gate_up_fp8.reset();
    down_fp8.reset();
  }

  std::array<const Tensor*, 17> all() const {
    return {&x,    &xn,   &rstd,  &qkv,   &lse,       &atty,  &res2,   &xn2, &rstd2,
            &gate_up, &h, &d_out, &d_gate_up, &d_xn2, &d_res2, &d_qkv, &d_xn};
  }
};

class Layers {
 public:
  using BlockActs = cuda_llama::BlockActs;
  using CpuLayers = llama::Layers;  // the parameter layouts

  /// Uploads the rotary tables on ctx's stream.
  explicit Layers(const CudaLayerContext& ctx);

  Tensor embedding_forward(const Tensor& tokens, std::int64_t B, std::int64_t T) const;
  template <class G>
  void embedding_backward_weight(const Tensor& d_embed, const Tensor& tokens, std::int64_t B,
                                 std::int64_t T, cudaStream_t s) const;

  /// As gpt2_cuda_layers.hpp's: attn_norm, qkv, rotary and GQA (fills xn, rstd, qkv, lse,
  /// atty); attn.o of a.atty; mlp_norm (fused with res2 = a.x + attn.o's output when the
  /// attention half is held), gate_up and SwiGLU; mlp.down of a.h; what recompute drops.
  void attention_half(int j, BlockActs& a, const Tensor& res_a, const Tensor& res_b,
                      std::int64_t B, std::int64_t T) const;
  Tensor attention_out(int j, BlockActs& a, std::int64_t B, std::int64_t T) const;
  void mlp_half(int j, BlockActs& a, std::int64_t B, std::int64_t T) const;
  Tensor mlp_out(int j, BlockActs& a, std::int64_t B, std::int64_t T) const;
  void drop_recomputed(int j, BlockActs& a) const;

  Tensor mlp_half_backward_input(int j, BlockActs& a, const Tensor& d_out, std::int64_t B,
                                 std::int64_t T) const;
  Tensor attention_half_backward_input(int j, BlockActs& a, const Tensor& d_res2,
                                       std::int64_t B, std::int64_t T) const;
  template <class G>
  void mlp_half_backward_weight(int j, const BlockActs& a, std::int64_t B, std::int64_t T,
                                cudaStream_t s) const;
  template <class G>
  void attention_half_backward_weight(int j, const BlockActs& a, std::int64_t B,
                                      std::int64_t T, cudaStream_t s) const;

  void final_norm_forward(CudaHeadActs& h, const Tensor& x, const Tensor& res_a,
                          const Tensor& res_b, std::int64_t B, std::int64_t T) const;
  Tensor final_norm_backward_input(const CudaHeadActs& h, std::int64_t B, std::int64_t T) const;
  template <class G>
  void final_norm_backward_weight(const CudaHeadActs& h, std::int64_t B, std::int64_t T,
                                  cudaStream_t s) const;
  static constexpr std::size_t kLmHead = 1;

 private:
  std::int64_t qkv_width() const;

  const CudaLayerContext* ctx_;  // the stage's, which outlives its layers
  Tensor cos_, sin_;             // (seq_len, hs/2) f32 on the device; empty without blocks
};

}  // namespace conveyor::cuda_llama
