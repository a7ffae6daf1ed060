#pragma once
// The keys and values of every block for the positions a generation has read so far: what
// lets each new token attend to the earlier ones without recomputing them
// (kv_decoder.hpp). One sequence; a block's rows are positions, each the NKV key (or
// value) heads side by side, (capacity, NKV * hs) f32. For a Llama the keys are stored
// rotated (rotary at their own positions), as attention reads them.
// Invariant: rows [0, length) of every block hold positions [0, length); rows beyond are
// unset (uninitialized).
#include <cstdint>
#include <vector>

#include "kernels/model/gpt_config.hpp"
#include "kernels/tensor/tensor.hpp"

namespace conveyor {

struct KvCache {
  /// Room for `capacity` positions of the model `c` (GPT-2: NKV = heads).
  KvCache(const GptConfig& c, std::int64_t capacity) : capacity(capacity) {
    const std::int64_t width = c.kv_head_count() * c.head_dim();
    for (std::int64_t b = 0; b < c.layers; ++b) {
      keys.push_back(Tensor::uninitialized({capacity, width}));
      values.push_back(Tensor::uninitialized({capacity, width}));
    }
  }
  std::int64_t capacity = 0;
  std::int64_t length = 0;     // positions held
  std::vector<Tensor> keys;    // per block, (capacity, NKV * hs)
  std::vector<Tensor> values;  // per block, (capacity, NKV * hs)
  std::size_t bytes() const { return 2 * keys.size() * (keys.empty() ? 0 : keys[0].bytes()); }
};

}  // namespace conveyor
