#include "kernels/data/micro_batch_sampler.hpp"

#include <stdexcept>
#include <string>

namespace conveyor {
namespace {

// splitmix64's output function (Steele, Lea, Flood 2014): a bijection on 64 bits whose
// outputs for consecutive inputs are statistically independent.
constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

void check_window(TokenRange range, std::int64_t seq_len) {
  if (seq_len < 1) throw std::invalid_argument("sample_micro_batch: seq_len must be >= 1");
  if (range.end < range.begin || range.size() < static_cast<std::size_t>(seq_len) + 1)
    throw std::invalid_argument("sample_micro_batch: range [" + std::to_string(range.begin) +
                                ", " + std::to_string(range.end) + ") holds fewer than seq_len + 1 = " +
                                std::to_string(seq_len + 1) + " tokens");
}

}  // namespace

std::size_t sample_window_start(TokenRange range, const SampleKey& key, std::int64_t row,
                                std::int64_t seq_len) {
  check_window(range, seq_len);
  std::uint64_t h = splitmix64(key.seed);
  h = splitmix64(h ^ static_cast<std::uint64_t>(key.step));
  h = splitmix64(h ^ static_cast<std::uint64_t>(key.micro_batch));
  h = splitmix64(h ^ key.stream);
  const std::uint64_t starts = range.size() - static_cast<std::uint64_t>(seq_len);
  // The modulo bias is below starts / 2^64: irrelevant for any corpus that fits in memory.
  return range.begin + static_cast<std::size_t>(splitmix64(h ^ static_cast<std::uint64_t>(row)) % starts);
}

MicroBatch sample_micro_batch(const TokenCorpus& corpus, TokenRange range, const SampleKey& key,
                              std::int64_t batch_size, std::int64_t seq_len) {
  check_window(range, seq_len);
  if (batch_size < 1) throw std::invalid_argument("sample_micro_batch: batch_size must be >= 1");
  if (range.end > corpus.size())
    throw std::invalid_argument("sample_micro_batch: range end " + std::to_string(range.end) +
                                " is past the corpus size " + std::to_string(corpus.size()));
  MicroBatch mb{Tensor::zeros({batch_size, seq_len}, DType::i32),
                Tensor::zeros({batch_size, seq_len}, DType::i32)};
  const TokenId* src = corpus.tokens().data();
  std::int32_t* tokens = mb.tokens.i32();
  std::int32_t* targets = mb.targets.i32();
  const auto T = static_cast<std::size_t>(seq_len);
  for (std::int64_t b = 0; b < batch_size; ++b) {
    const TokenId* window = src + sample_window_start(range, key, b, seq_len);
    std::int32_t* tok_row = tokens + static_cast<std::size_t>(b) * T;
    std::int32_t* tgt_row = targets + static_cast<std::size_t>(b) * T;
    for (std::size_t t = 0; t < T; ++t) {
      tok_row[t] = static_cast<std::int32_t>(window[t]);
      tgt_row[t] = static_cast<std::int32_t>(window[t + 1]);
    }
  }
  return mb;
}

}  // namespace conveyor
