#pragma once
// What generation (apps/sample/generate.hpp) needs of a model: read a few new tokens of one
// sequence after those read so far and give their logits. Two implementations keep the
// keys and values of earlier positions in a cache: KvDecoder (kv_decoder.hpp) on the CPU
// in fp32, and CudaKvDecoder (kernels/cuda/model/cuda_kv_decoder.hpp) on one GPU in bf16.
// Both hand back f32 logits on the host, so the sampling that follows is the same code and
// the same seed draws the same tokens wherever the logits agree.
// Invariant (each implementation's test checks it): append(tokens) after a prefix of
// length L gives, for each new token at position L + i, the logits a full forward over the
// L + i + 1 first tokens gives at its last position.
// Thread-safety: none; one decoder is one sequence.
#include <cstdint>
#include <span>

#include "kernels/tensor/tensor.hpp"

namespace conveyor {

class TokenDecoder {
 public:
  virtual ~TokenDecoder() = default;

  /// Reads `tokens` at positions [length(), length() + n) and returns their logits, host
  /// f32 (n, V) — or only the last one's, (1, V), with last_only. Throws
  /// std::invalid_argument on an empty span, an id outside [0, vocab) or more positions
  /// than capacity(), before changing anything. (Every override declares the same default.)
  virtual Tensor append(std::span<const std::int32_t> tokens, bool last_only = false) = 0;

  /// Positions read so far, and the most there can be.
  virtual std::int64_t length() const = 0;
  virtual std::int64_t capacity() const = 0;
  /// Forget every position (a new sequence).
  virtual void reset() = 0;

 protected:
  TokenDecoder() = default;
  TokenDecoder(const TokenDecoder&) = default;
  TokenDecoder& operator=(const TokenDecoder&) = default;
};

}  // namespace conveyor
