#pragma once
// A whole model's forward, a few new tokens at a time, over a key/value cache: generation
// on the CPU (apps/sample/). The same layers as GptStage's (gpt2_layers.hpp,
// llama_layers.hpp), from the same kernels (kernels/cpu/), in fp32: GPT-2 (LayerNorm,
// learned positions wpe[position], GELU, biases) and Llama (RMSNorm, rotary at each token's
// own position from the same tables as training's llama::Context, grouped-query attention,
// SwiGLU). Attention reads the cache (kernels/cpu/cached_attention.hpp).
// Invariant: append(tokens) after a prefix of length L gives, for each new token at
// position L + i, the logits a full forward over the L + i + 1 first tokens gives at its
// last position (kv_decoder_test: within 2e-5 of the logits' largest magnitude, fp32).
// token_decoder.hpp is its interface, which CudaKvDecoder (kernels/cuda/model/) shares.
// Thread-safety: none; one decoder is one sequence. It reads the parameters it was given
// on every call: they must outlive it and may change between calls (then reset()).
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/model/gpt_config.hpp"
#include "kernels/model/kv_cache.hpp"
#include "kernels/model/param.hpp"
#include "kernels/model/token_decoder.hpp"
#include "kernels/tensor/tensor.hpp"

namespace conveyor {

class KvDecoder final : public TokenDecoder {
 public:
  /// `params`: the whole model's, named as a GptStage holding every block and the head
  /// (wte.weight, blocks.<b>..., lm_head.weight). The cache holds `max_positions`
  /// positions (0 or more than seq_len: seq_len): a model of a long context need not have
  /// its whole cache allocated for a short text. Throws std::invalid_argument naming a
  /// parameter that is missing or of the wrong shape.
  KvDecoder(const GptConfig& config, const std::vector<Param>& params, std::int64_t max_positions = 0);
  ~KvDecoder() override;
  KvDecoder(KvDecoder&&) noexcept;
  KvDecoder& operator=(KvDecoder&&) noexcept;

  /// Reads `tokens` at positions [length(), length() + n) and returns their logits, f32
  /// (n, V) — or only the last one's, (1, V), with last_only. Throws std::invalid_argument
  /// on an empty span, an id outside [0, vocab) or more positions than capacity().
  Tensor append(std::span<const std::int32_t> tokens, bool last_only = false) override;

  /// Positions read so far, and the most there can be (model.seq_len, or max_positions).
  std::int64_t length() const override;
  std::int64_t capacity() const override;
  /// Forget every position (a new sequence).
  void reset() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace conveyor
