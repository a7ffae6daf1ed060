#include "kernels/data/token_corpus.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <charconv>
#include <cmath>
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

std::vector<std::uint16_t> load_text(const InputFile& file) {
  const std::size_t n = file.size();
  std::vector<std::uint16_t> tokens(n);
  // Read the bytes into the upper half of the token buffer, then widen them in place from
  // the front: token i (bytes 2i, 2i+1) never overwrites byte n + j for any j > i, since
  // 2i + 1 < n + i + 1 whenever i < n. One buffer, one read.
  auto* bytes = reinterpret_cast<unsigned char*>(tokens.data());
  file.read_at(bytes + n, n, 0);
  for (std::size_t i = 0; i < n; ++i) tokens[i] = bytes[n + i];
  return tokens;
}

std::vector<std::uint16_t> load_tokens(const InputFile& file) {
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
    if (head[1] != kLlmcVersionU16)
      fail(path, "llm.c header version " + std::to_string(head[1]) +
                     " is not supported (only version 1, uint16 tokens)");
    if (head[2] < 0) fail(path, "llm.c header token count is negative: " + std::to_string(head[2]));
    count = static_cast<std::size_t>(head[2]);
    data_offset = kLlmcHeaderBytes;
    const std::size_t want = data_offset + 2 * count;
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
    if (size % 2 != 0)
      fail(path, "odd byte length " + std::to_string(size) +
                     " for raw uint16 tokens (data.format tokens wants 2 bytes per token; "
                     "use data.format text for a text file)");
    count = size / 2;
  }
  std::vector<std::uint16_t> tokens(count);
  file.read_at(tokens.data(), 2 * count, data_offset);
  return tokens;
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

TokenCorpus TokenCorpus::load(const std::string& path, DataFormat format, std::int64_t vocab) {
  if (format == DataFormat::text && vocab < 256)
    fail(path, "data.format text makes every byte a token, so model.vocab must be >= 256, got " +
                   std::to_string(vocab));
  const InputFile file(path, "data file", "check data.path");
  if (file.size() == 0) fail(path, "data file is empty");
  // The corpus is held in memory as 16-bit tokens (a text byte becomes 2 bytes): say so
  // up front for one that cannot fit, rather than fail the allocation unnamed.
  const std::uint64_t held = format == DataFormat::text ? 2 * file.size() : file.size();
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
    corpus.tokens_ = format == DataFormat::text ? load_text(file) : load_tokens(file);
  } catch (const std::bad_alloc&) {
    fail(path, "not enough memory to hold the corpus (" + gib(held) + " of tokens)");
  }

  // A branch-free maximum first (it vectorises); the position is searched for only when
  // some id is out of range.
  const auto& t = corpus.tokens_;
  std::uint16_t max_id = 0;
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

TokenCorpus TokenCorpus::from_tokens(std::vector<std::uint16_t> tokens) {
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
  std::vector<std::uint64_t> counts(65536, 0);
  for (auto id : t) ++counts[id];
  const double n = static_cast<double>(t.size());
  double h = 0.0;
  for (auto c : counts) {
    if (c == 0) continue;
    const double p = static_cast<double>(c) / n;
    h -= p * std::log(p);
  }
  return h;
}

}  // namespace conveyor
