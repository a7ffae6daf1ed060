#include "kernels/data/token_corpus.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <new>
#include <string>

#include "kernels/common/error.hpp"
#include "kernels/io/input_file.hpp"

namespace conveyor {
namespace {

// llm.c's .bin layout (dev/data/data_common.py): 256 little-endian int32, then the tokens.
constexpr std::size_t kLlmcHeaderBytes = 1024;
constexpr std::int32_t kLlmcMagic = 20240520;
constexpr std::int32_t kLlmcVersionU16 = 1;
constexpr std::int32_t kLlmcVersionU32 = 2;

static_assert(std::endian::native == std::endian::little,
              "token files are little-endian; a big-endian host needs byte swaps here");

// The shortest decimal that reads back as `v` ("0.1", not "0.100000").
std::string shortest(double v) {
  std::array<char, 32> buf{};
  auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  return std::string(buf.data(), r.ptr);
}

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw InputError(path + ": " + what);
}

// Reads `count` little-endian ids of `width` bytes (1, 2 or 4) at `offset` into TokenIds:
// one read into the tail of the final buffer, then widened in place from the front, a
// block at a time through a small copy (so the loop vectorises). Ids [i, j) are written to
// bytes [4i, 4j) after their sources are copied out, and the sources of later ids start
// at (4 - width) * count + width * j >= 4j whenever j <= count: no block overwrites one
// still to be read. One buffer, one read.
template <class Narrow>
std::vector<TokenId> read_ids(const InputFile& file, std::size_t count, std::uint64_t offset) {
  static_assert(sizeof(Narrow) <= sizeof(TokenId));
  std::vector<TokenId> ids(count);
  auto* bytes = reinterpret_cast<unsigned char*>(ids.data());
  const std::size_t tail = (sizeof(TokenId) - sizeof(Narrow)) * count;
  file.read_at(bytes + tail, sizeof(Narrow) * count, offset);
  if constexpr (sizeof(Narrow) < sizeof(TokenId)) {
    constexpr std::size_t kBlock = 4096;
    std::array<Narrow, kBlock> block;
    for (std::size_t i = 0; i < count; i += kBlock) {
      const std::size_t k = std::min(kBlock, count - i);
      std::memcpy(block.data(), bytes + tail + sizeof(Narrow) * i, sizeof(Narrow) * k);
      TokenId* out = ids.data() + i;
      for (std::size_t j = 0; j < k; ++j) out[j] = block[j];
    }
  }
  return ids;
}

std::vector<TokenId> read_ids(const InputFile& file, std::size_t count, std::size_t width,
                              std::uint64_t offset) {
  switch (width) {
    case 1: return read_ids<std::uint8_t>(file, count, offset);
    case 2: return read_ids<std::uint16_t>(file, count, offset);
    default: return read_ids<std::uint32_t>(file, count, offset);
  }
}

const char* width_name(std::size_t width) { return width == 2 ? "uint16" : "uint32"; }

std::vector<TokenId> load_tokens(const InputFile& file, std::size_t width) {
  const std::string& path = file.path();
  const std::size_t size = file.size();
  std::size_t data_offset = 0;
  std::size_t count = 0;
  std::array<std::int32_t, 3> head{};
  if (size >= sizeof(head)) file.read_at(head.data(), sizeof(head), 0);
  if (size >= sizeof(head) && head[0] == kLlmcMagic) {
    if (size < kLlmcHeaderBytes)
      fail(path, "truncated llm.c file: " + std::to_string(size) + " bytes, shorter than its " +
                     std::to_string(kLlmcHeaderBytes) + "-byte header");
    if (head[1] != kLlmcVersionU16 && head[1] != kLlmcVersionU32)
      fail(path, "llm.c header version " + std::to_string(head[1]) +
                     " is not supported (version 1: uint16 tokens, version 2: uint32 tokens)");
    const std::size_t header_width = head[1] == kLlmcVersionU16 ? 2 : 4;
    if (header_width != width)
      fail(path, "llm.c header version " + std::to_string(head[1]) + " holds " +
                     width_name(header_width) + " tokens but data.token_bytes is " +
                     std::to_string(width) + " (set data.token_bytes: " +
                     std::to_string(header_width) + ")");
    if (head[2] < 0) fail(path, "llm.c header token count is negative: " + std::to_string(head[2]));
    count = static_cast<std::size_t>(head[2]);
    data_offset = kLlmcHeaderBytes;
    const std::size_t want = data_offset + width * count;
    if (size < want)
      fail(path, "truncated llm.c file: header says " + std::to_string(count) +
                     " tokens (" + std::to_string(want) + " bytes) but the file has " +
                     std::to_string(size) + " bytes");
    if (size > want)
      fail(path, "llm.c file has " + std::to_string(size - want) +
                     " bytes after its " + std::to_string(count) +
                     " tokens (header token count does not match the file size)");
    if (count == 0) fail(path, "llm.c file holds no tokens (header token count is 0)");
  } else {
    if (size % width != 0)
      fail(path, (width == 2 ? "odd byte length " + std::to_string(size)
                             : "byte length " + std::to_string(size) + " is not a multiple of " +
                                   std::to_string(width)) +
                     " for raw " + width_name(width) + " tokens (data.format tokens with "
                     "data.token_bytes " + std::to_string(width) + " wants " +
                     std::to_string(width) + " bytes per token; use data.format text for a "
                     "text file)");
    count = size / width;
  }
  return read_ids(file, count, width, data_offset);
}

}  // namespace

std::string_view data_format_name(DataFormat format) {
  switch (format) {
    case DataFormat::text: return "text";
    case DataFormat::tokens: return "tokens";
  }
  return "?";
}

std::optional<DataFormat> parse_data_format(std::string_view name) {
  if (name == "text") return DataFormat::text;
  if (name == "tokens") return DataFormat::tokens;
  return std::nullopt;
}

const std::vector<std::string>& known_data_format_names() {
  static const std::vector<std::string> names = {"text", "tokens"};
  return names;
}

TokenCorpus TokenCorpus::load(const std::string& path, DataFormat format, std::int64_t vocab,
                              int token_bytes) {
  if (token_bytes != 2 && token_bytes != 4)
    fail(path, "data.token_bytes must be 2 or 4, got " + std::to_string(token_bytes));
  if (format == DataFormat::text && token_bytes != 2)
    fail(path, "data.token_bytes " + std::to_string(token_bytes) +
                   " is for data.format tokens; data.format text reads a byte per token "
                   "(leave data.token_bytes at 2)");
  if (format == DataFormat::text && vocab < 256)
    fail(path, "data.format text makes every byte a token, so model.vocab must be >= 256, got " +
                   std::to_string(vocab));
  const InputFile file(path, "data file", "check data.path");
  if (file.size() == 0) fail(path, "data file is empty");
  // The corpus is held in memory as 32-bit ids (a text byte becomes 4 bytes, a uint16 id
  // 4): say so up front for one that cannot fit, rather than fail the allocation unnamed.
  const std::uint64_t width = format == DataFormat::text ? 1 : static_cast<std::uint64_t>(token_bytes);
  const std::uint64_t held = file.size() / width * sizeof(TokenId);
  const auto gib = [](std::uint64_t bytes) { return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1ull << 30)); };
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  const std::uint64_t physical =
      pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : 0;
  if (physical > 0 && held > physical)
    fail(path, "data file of " + gib(file.size()) + " would be " + gib(held) +
                   " of tokens in memory, more than this machine's " + gib(physical) +
                   " (the corpus is read whole; use a smaller file)");

  TokenCorpus corpus;
  try {
    corpus.tokens_ = format == DataFormat::text ? read_ids(file, file.size(), 1, 0)
                                                : load_tokens(file, width);
  } catch (const std::bad_alloc&) {
    fail(path, "not enough memory to hold the corpus (" + gib(held) + " of tokens)");
  }

  // A branch-free maximum first (it vectorises); the position is searched for only when
  // some id is out of range.
  const auto& t = corpus.tokens_;
  TokenId max_id = 0;
  for (auto id : t) max_id = id > max_id ? id : max_id;
  if (static_cast<std::int64_t>(max_id) < vocab) return corpus;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (static_cast<std::int64_t>(t[i]) >= vocab)
      fail(path, "token id " + std::to_string(t[i]) + " at position " + std::to_string(i) +
                     " is >= model.vocab " + std::to_string(vocab) +
                     " (raise model.vocab or re-tokenize the data)");
  }
  return corpus;
}

TokenCorpus TokenCorpus::from_tokens(std::vector<TokenId> tokens) {
  TokenCorpus corpus;
  corpus.tokens_ = std::move(tokens);
  return corpus;
}

CorpusSplits split_corpus(const TokenCorpus& corpus, double val_fraction, std::int64_t seq_len) {
  if (!(val_fraction > 0.0 && val_fraction < 1.0))
    throw InputError("data.val_fraction: must be in (0, 1), got " + shortest(val_fraction));
  if (seq_len < 1) throw InputError("model.seq_len: must be >= 1, got " + std::to_string(seq_len));
  const std::size_t n = corpus.size();
  const auto n_train = static_cast<std::size_t>(std::floor(static_cast<double>(n) * (1.0 - val_fraction)));
  CorpusSplits s{{0, n_train}, {n_train, n}};
  const auto need = static_cast<std::size_t>(seq_len) + 1;
  auto too_small = [&](const char* which, std::size_t got, const char* advice) {
    throw InputError("corpus of " + std::to_string(n) + " tokens is too small: data.val_fraction " +
                     shortest(val_fraction) + " leaves a " + which + " split of " +
                     std::to_string(got) + " tokens, fewer than model.seq_len + 1 = " +
                     std::to_string(need) + " (" + advice + ")");
  };
  if (s.train.size() < need)
    too_small("training", s.train.size(), "use a larger corpus or a smaller data.val_fraction");
  if (s.val.size() < need)
    too_small("validation", s.val.size(), "use a larger corpus or a larger data.val_fraction");
  return s;
}

double unigram_entropy(const TokenCorpus& corpus) {
  const auto& t = corpus.tokens();
  if (t.empty()) return 0.0;
  const double n = static_cast<double>(t.size());
  double h = 0.0;
  const auto add = [&](std::uint64_t c) {
    const double p = static_cast<double>(c) / n;
    h -= p * std::log(p);
  };
  // A count per id up to the largest (a loaded corpus's ids are below model.vocab); ids
  // too large for that table are counted in a sorted copy instead.
  TokenId max_id = 0;
  for (auto id : t) max_id = id > max_id ? id : max_id;
  if (max_id < (TokenId{1} << 24)) {
    std::vector<std::uint64_t> counts(std::size_t{max_id} + 1, 0);
    for (auto id : t) ++counts[id];
    for (auto c : counts)
      if (c != 0) add(c);
    return h;
  }
  std::vector<TokenId> sorted(t);
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j < sorted.size() && sorted[j] == sorted[i]) ++j;
    add(j - i);
    i = j;
  }
  return h;
}

}  // namespace conveyor
