#pragma once
// GPT-2's layers on one GPU, as the CUDA stage skeleton composes them (cuda_stage_model.cpp;
// the CPU's are kernels/model/gpt2_layers.hpp, whose layouts give the parameters):
//   Embedding  wte[token] + wpe[t]
//   Block      attention half  x_j -> ln1 -> qkv -> attention -> proj
//              MLP half        [res2 = x_j + proj] ln2 -> fc1+GELU -> fc2
//              x_{j+1} = res2 + fc2 is formed by the next block's ln1 (or ln_f) in the same
//              kernel; the skeleton materialises it after a stage's last block.
//   Final norm ln_f (LayerNorm), fused with the last block's residual add.
// A slice may begin or end between a block's halves (stage_slice.hpp): a slice ending after
// an attention half hands out res2 = x_j + proj; the next one starts at that block's ln2, a
// plain LayerNorm of its input. The rounding is the same either way, so the losses and
// gradients do not depend on how the model is split (bitwise, on one GPU model and library
// version).
//
// Memory of one micro-batch's stash, per block and token: after forward x, ln1, atty, res2,
// ln2 (5C bf16), qkv (3C), pre-GELU and GELU (8C), 4 floats of LayerNorm statistics and NH
// floats of attention logsumexp. backward_input frees qkv, the logsumexp and the pre-GELU
// activation and adds d_out, d_ln2, d_res2, d_ln1 (4C bf16), d_qkv (3C) and d_fc1 (4C);
// backward_weight frees everything. A lone attention half keeps x, ln1, atty, qkv, its
// statistics and logsumexp (and adds d_res2, d_ln1, d_qkv); a lone MLP half keeps res2,
// ln2, the MLP's 8C and its statistics (and adds d_out, d_ln2, d_fc1).
// model.recompute (kernels/model/recompute.hpp): `attention` keeps x, res2, ln2 and the
// MLP's 8C; `full` keeps x alone (or, for a lone MLP half, res2, its input).
#include <array>
#include <cstdint>
#include <utility>

#include "kernels/cuda/model/cuda_layer_context.hpp"
#include "kernels/model/gpt2_layers.hpp"

namespace conveyor::cuda_gpt2 {

// What one block keeps between forward, backward_input and backward_weight (device).
struct BlockActs {
  // forward
  Tensor x;                        // (B, T, C) bf16 block input, the residual stream
  Tensor ln1, ln1_mean, ln1_rstd;  // (B, T, C) bf16, (B, T) f32, (B, T) f32
  Tensor qkv;                      // (B, T, 3C) bf16; freed by backward_input
  Tensor lse;                      // (B, NH, T) f32 attention logsumexp; freed by backward_input
  Tensor atty;                     // (B, T, C) bf16 attention output, input of attn.proj
  Tensor res2;                     // (B, T, C) bf16 x + attn.proj(atty); a lone MLP half's input
  Tensor ln2, ln2_mean, ln2_rstd;  // (B, T, C) bf16, (B, T), (B, T)
  Tensor pre_gelu;                 // (B, T, 4C) bf16 fc1 output; freed by backward_input
  Tensor gelu;                     // (B, T, 4C) bf16 input of mlp.fc2
  // backward_input, for backward_weight
  Tensor d_out;   // (B, T, C) gradient of the block output
  Tensor d_fc1;   // (B, T, 4C) gradient of the pre-GELU activation
  Tensor d_ln2;   // (B, T, C)
  Tensor d_res2;  // (B, T, C)
  Tensor d_qkv;   // (B, T, 3C)
  Tensor d_ln1;   // (B, T, C)
  // precision.matmul fp8: each linear's input and output gradient as its weight gradient
  // reads them (transposed FP8 codes, 1 byte per element of ln1, atty, ln2, gelu and of
  // d_qkv, d_res2, d_fc1, d_out), kept from the casts forward and backward_input made.
  LinearFp8Keep qkv_fp8, proj_fp8, fc1_fp8, fc2_fp8;

  // What only the MLP half's weight gradients read, once its input gradient is done.
  void release_mlp_half() {
    for (Tensor* t : {&d_out, &gelu, &d_fc1, &ln2, &ln2_mean, &ln2_rstd, &d_ln2, &res2}) *t = {};
    fc1_fp8.reset();
    fc2_fp8.reset();
  }

  std::array<const Tensor*, 19> all() const {
    return {&x,    &ln1,      &ln1_mean, &ln1_rstd, &qkv,   &lse,   &atty,
            &res2, &ln2,      &ln2_mean, &ln2_rstd, &pre_gelu, &gelu, &d_out,
            &d_fc1, &d_ln2,   &d_res2,   &d_qkv,    &d_ln1};
  }
};

class Layers {
 public:
  using BlockActs = cuda_gpt2::BlockActs;
  using CpuLayers = gpt2::Layers;  // the parameter layouts

  explicit Layers(const CudaLayerContext& ctx) : ctx_(&ctx) {}

  /// x = wte[tokens] + wpe[t] (B, T, C) bf16, fresh.
  Tensor embedding_forward(const Tensor& tokens, std::int64_t B, std::int64_t T) const;
  template <class G>
  void embedding_backward_weight(const Tensor& d_embed, const Tensor& tokens, std::int64_t B,
                                 std::int64_t T, cudaStream_t s) const;

  /// ln1, qkv and attention of block j: fills ln1 (and its statistics), qkv, lse and atty.
  /// The input is a.x, or res_a + res_b when res_a is defined (then a.x is formed here, by
  /// ln1's kernel: the same bits as a separate add).
  void attention_half(int j, BlockActs& a, const Tensor& res_a, const Tensor& res_b,
                      std::int64_t B, std::int64_t T) const;
  /// attn.proj of a.atty (fresh): the attention half's output is a.x + that (res2).
  Tensor attention_out(int j, BlockActs& a, std::int64_t B, std::int64_t T) const;
  /// ln2, fc1 and GELU: with the attention half, res2 = a.x + attention_out is formed by
  /// ln2's kernel (into a.res2); a lone MLP half normalises a.res2, its input.
  void mlp_half(int j, BlockActs& a, std::int64_t B, std::int64_t T) const;
  /// mlp.fc2 of a.gelu (fresh): the block's output is a.res2 + that.
  Tensor mlp_out(int j, BlockActs& a, std::int64_t B, std::int64_t T) const;
  /// model.recompute: after a block's forward, drops what backward will compute again (the
  /// skeleton computes it again with the halves above: the same kernels on the same input,
  /// the same bits).
  void drop_recomputed(int j, BlockActs& a) const;

  /// The MLP half's input gradient: returns d_res2 (the residual's d_out plus ln2's).
  Tensor mlp_half_backward_input(int j, BlockActs& a, const Tensor& d_out, std::int64_t B,
                                 std::int64_t T) const;
  /// The attention half's input gradient from d_res2: returns dx (d_res2 plus ln1's).
  Tensor attention_half_backward_input(int j, BlockActs& a, const Tensor& d_res2,
                                       std::int64_t B, std::int64_t T) const;
  /// Reads d_out, gelu, d_fc1, ln2 (+ statistics), d_ln2 and res2: release_mlp_half's.
  template <class G>
  void mlp_half_backward_weight(int j, const BlockActs& a, std::int64_t B, std::int64_t T,
                                cudaStream_t s) const;
  template <class G>
  void attention_half_backward_weight(int j, const BlockActs& a, std::int64_t B,
                                      std::int64_t T, cudaStream_t s) const;

  /// ln_f: h.lnf (and statistics) from h.x, or from res_a + res_b when res_a is defined
  /// (then h.x is formed here).
  void final_norm_forward(CudaHeadActs& h, const Tensor& x, const Tensor& res_a,
                          const Tensor& res_b, std::int64_t B, std::int64_t T) const;
  /// The gradient of ln_f's input from h.d_lnf (fresh).
  Tensor final_norm_backward_input(const CudaHeadActs& h, std::int64_t B, std::int64_t T) const;
  template <class G>
  void final_norm_backward_weight(const CudaHeadActs& h, std::int64_t B, std::int64_t T,
                                  cudaStream_t s) const;
  /// lm_head.weight's position within the head's parameters.
  static constexpr std::size_t kLmHead = 2;

 private:
  const CudaLayerContext* ctx_;  // the stage's, which outlives its layers
};

}  // namespace conveyor::cuda_gpt2
