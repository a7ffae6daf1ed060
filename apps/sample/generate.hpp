#pragma once
// The generation loop: the prompt read at once into the KV cache, then one token at a time,
// each drawn (token_sampler.hpp) from the logits of the last position and read back in.
// It stops after `tokens` new tokens, or when the decoder's cache is full (a cache of the
// model's seq_len: no sliding window, the model never saw positions beyond it).
#include <cstdint>
#include <functional>
#include <vector>

#include "apps/sample/token_sampler.hpp"
#include "kernels/model/token_decoder.hpp"

namespace conveyor {

struct Generated {
  std::vector<std::int32_t> ids;  // the new tokens, without the prompt
  bool hit_seq_len = false;       // stopped before `tokens`: the cache was full
  double seconds = 0.0;           // the whole loop, prompt included
};

/// REQUIRES: prompt not empty and shorter than decoder.capacity() (the caller's errors name
/// its flag); tokens >= 1. `on_token` (may be empty) sees each new id as it is drawn.
Generated generate(TokenDecoder& decoder, const std::vector<std::int32_t>& prompt, std::int64_t tokens,
                   const SamplingSettings& sampling, const std::function<void(std::int32_t)>& on_token = {});

}  // namespace conveyor
