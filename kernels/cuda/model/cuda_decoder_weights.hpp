#pragma once
// A whole model's weights on one GPU for generation (cuda_kv_decoder.hpp): each parameter
// found by name in GptStage's list (as KvDecoder finds them), checked for its shape and
// uploaded once as bf16 (rounded to nearest even, as training's CUDA stage rounds its fp32
// master into the copy its kernels read). Only what the forward reads: no gradients, no
// optimizer state. The LM head's rows are padded with zeros to a multiple of 8 (the
// tensor-core GEMMs need it), so a vocabulary such as GPT-2's 50257 works; the padded
// logits are dropped when read back. Llama also gets training's rotary tables
// (llama::Context: (seq_len, hs/2) f32, computed in double).
// Every tensor here is device memory of `device`, allocated on `stream`.
#include <cstdint>
#include <vector>

#include "kernels/cuda/types.hpp"
#include "kernels/model/gpt_config.hpp"
#include "kernels/model/param.hpp"
#include "kernels/tensor/tensor.hpp"

namespace conveyor {

struct CudaDecoderWeights {
  // A block's weights, GPT-2's or Llama's: the biases and norm biases stay empty for Llama.
  struct Block {
    Tensor norm1_w, norm1_b;  // (C) ln1 / attn_norm
    Tensor qkv_w, qkv_b;      // (W, C), (W) W = C + 2 NKV hs
    Tensor proj_w, proj_b;    // (C, C), (C) attn.proj / attn.o
    Tensor norm2_w, norm2_b;  // (C) ln2 / mlp_norm
    Tensor up_w, up_b;        // (H, C), (H) mlp.fc1 / (2F, C) mlp.gate_up
    Tensor down_w, down_b;    // (C, H), (C) mlp.fc2 / (C, F) mlp.down
  };

  Tensor wte;                   // (V, C) bf16
  Tensor wpe;                   // (seq_len, C) bf16; GPT-2 only
  Tensor norm_f_w, norm_f_b;    // (C) bf16; the bias GPT-2 only
  Tensor lm_head;               // (padded_vocab, C) bf16, rows V.. zero
  std::int64_t padded_vocab = 0;
  Tensor rope_cos, rope_sin;    // (seq_len, hs/2) f32; Llama only
  std::vector<Block> blocks;

  /// Uploads `params` (host f32, named as a GptStage holding the whole model) on `stream`
  /// of `device` (made current here). Throws std::invalid_argument naming a parameter that
  /// is missing or of the wrong shape, or a width the kernels cannot take (d_model, the qkv
  /// and MLP widths multiples of 8 for the GEMMs; head_dim at most 256 for the decode
  /// attention), before allocating anything on the device.
  CudaDecoderWeights(const GptConfig& c, const std::vector<Param>& params, int device,
                     cudaStream_t stream);

  /// Device bytes held.
  std::size_t bytes() const;
};

}  // namespace conveyor
