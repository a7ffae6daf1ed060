#pragma once
// Which sequences a micro-batch gets is a pure function of (seed, step, micro-batch
// index, split): any stage, process or replayed run computes the same batch without
// shared state, which is what makes replay after a fault and any pipeline split exact.
//
// The hash (a counter-based generator, no RNG object anywhere):
//   h = splitmix64(seed); h = splitmix64(h ^ step); h = splitmix64(h ^ micro_batch);
//   h = splitmix64(h ^ stream); row r starts at range.begin + splitmix64(h ^ r) % (n - T)
// where n = range.size() and splitmix64(x) is Steele et al.'s finalizer of x + 0x9e37...
// (the golden-ratio increment). The windows [start, start + T] all lie inside `range`.
// Changing this function changes every run's data order: treat it as a file format.
#include <cstdint>

#include "kernels/data/token_corpus.hpp"
#include "kernels/tensor/tensor.hpp"

namespace conveyor {

struct MicroBatch {
  Tensor tokens;   // i32 (B, T)
  Tensor targets;  // i32 (B, T): tokens shifted by one
};

struct SampleKey {
  std::uint64_t seed = 0;
  std::int64_t step = 0;
  std::int64_t micro_batch = 0;
  std::uint64_t stream = 0;  // 0 for training, 1 for evaluation
};

/// The first token of row `row`'s window: the hash above, exposed for tests and tools.
std::size_t sample_window_start(TokenRange range, const SampleKey& key, std::int64_t row,
                                std::int64_t seq_len);

/// B random windows of T + 1 tokens from `range`: row b of `tokens` is window b's first T
/// tokens, row b of `targets` its last T. Host tensors, i32 (batch_size, seq_len).
/// REQUIRES: batch_size >= 1, seq_len >= 1, range inside the corpus and holding at least
/// seq_len + 1 tokens (split_corpus guarantees it); throws std::invalid_argument otherwise.
MicroBatch sample_micro_batch(const TokenCorpus& corpus, TokenRange range, const SampleKey& key,
                              std::int64_t batch_size, std::int64_t seq_len);

}  // namespace conveyor
