#pragma once
// A whole model's forward, a few new tokens at a time, over a key/value cache on one GPU:
// `conveyor sample --device cuda[:N]`. The contract of KvDecoder (kernels/model/
// kv_decoder.hpp, through their interface token_decoder.hpp), computed as training's CUDA
// stage computes its forward (gpt2_cuda_layers.hpp, llama_cuda_layers.hpp), from the same
// kernels: bf16 weights (cuda_decoder_weights.hpp) and activations, fp32 accumulation, the
// residual add fused into the next norm; GPT-2 (LayerNorm, learned positions wpe[position],
// GELU fused into fc1's GEMM, biases) and Llama (RMSNorm, rotary at each token's own
// position from training's tables, grouped-query attention, SwiGLU). Attention reads the
// cache (kernels/cuda/decode_attention.hpp); a prompt (many rows) and a step (one row) run
// the same code. The logits come from the LM head's GEMM in fp32 (not rounded to bf16) and
// are copied to the host.
// The cache is bf16 on the device, per block (capacity, NKV * hs) keys (rotated, for a
// Llama) and values: the qkv GEMM writes them in bf16 (as training's attention reads
// them), so an f32 cache would hold the same values at twice the bytes.
// Invariant: as KvDecoder's, within bf16 rounding (cuda_kv_decoder_test states how much,
// against KvDecoder on the CPU and against a full re-run of the prefix on the GPU).
// Thread-safety: none; one decoder is one sequence. The weights are copied to the device
// when it is made: later changes to `params` are not seen.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/model/gpt_config.hpp"
#include "kernels/model/param.hpp"
#include "kernels/model/token_decoder.hpp"
#include "kernels/tensor/tensor.hpp"

namespace conveyor {

class CudaKvDecoder final : public TokenDecoder {
 public:
  /// `params`: the whole model's, host f32, named as a GptStage holding every block and
  /// the head (as KvDecoder's). The cache holds `max_positions` positions (0 or more than
  /// seq_len: seq_len). Runs on cuda:`device` on a stream of its own. Throws
  /// std::invalid_argument naming a parameter that is missing or misshapen, or a width the
  /// GPU kernels do not take (d_model and the qkv and MLP widths multiples of 8, head_dim at
  /// most 256); CudaError (CudaOutOfMemory) when the device fails.
  CudaKvDecoder(const GptConfig& config, const std::vector<Param>& params, int device,
                std::int64_t max_positions = 0);
  ~CudaKvDecoder() override;
  CudaKvDecoder(CudaKvDecoder&&) noexcept;
  CudaKvDecoder& operator=(CudaKvDecoder&&) noexcept;

  /// As KvDecoder::append; waits for the device and returns host f32 logits.
  Tensor append(std::span<const std::int32_t> tokens, bool last_only = false) override;
  std::int64_t length() const override;
  std::int64_t capacity() const override;
  void reset() override;

  /// Device bytes of the weights, and of the cache.
  std::size_t weight_bytes() const;
  std::size_t cache_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace conveyor
