#pragma once
// A training corpus held in memory as token ids.
// Formats (`data.format`):
//   text   - any file of bytes; each byte is a token (needs model.vocab >= 256).
//   tokens - raw uint16 little-endian token ids as nanoGPT's prepare scripts write them,
//            or llm.c's .bin files, recognised by a 1024-byte header of 256 int32 LE whose
//            first is the magic 20240520 (second: version, 1 = uint16 tokens; third: the
//            token count, which must match the file size exactly).
// Every token id is checked against the model's vocabulary when loading.
// A file is read in one call into its final buffer: a 100 MB corpus loads in well under a
// second and needs no more memory than its tokens.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor {

enum class DataFormat { text, tokens };

/// "text" | "tokens": the spelling of `data.format` in configs.
std::string_view data_format_name(DataFormat format);
/// The inverse of data_format_name; nullopt for an unknown name.
std::optional<DataFormat> parse_data_format(std::string_view name);
/// Every accepted `data.format` name, in a fixed order (for error messages and --help).
const std::vector<std::string>& known_data_format_names();

class TokenCorpus {
 public:
  /// Throws InputError naming the file: missing, unreadable, empty, odd length, a bad
  /// llm.c header, or a token id >= vocab (naming the id, its position and the vocab).
  static TokenCorpus load(const std::string& path, DataFormat format, std::int64_t vocab);
  static TokenCorpus from_tokens(std::vector<std::uint16_t> tokens);

  const std::vector<std::uint16_t>& tokens() const { return tokens_; }
  std::size_t size() const { return tokens_.size(); }

 private:
  std::vector<std::uint16_t> tokens_;
};

/// The half-open token range [begin, end) of one split of a corpus.
struct TokenRange {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::size_t size() const { return end - begin; }
};

struct CorpusSplits {
  TokenRange train;
  TokenRange val;
};

/// Train on the first floor((1 - val_fraction) * size) tokens, validate on the rest.
/// Throws InputError when either split is shorter than seq_len + 1 tokens (one window
/// of inputs plus its shifted targets), or when val_fraction is outside (0, 1).
CorpusSplits split_corpus(const TokenCorpus& corpus, double val_fraction, std::int64_t seq_len);

/// Unigram entropy of the corpus in nats per token: the loss of the best model that
/// ignores context. A model that learns goes well below it.
double unigram_entropy(const TokenCorpus& corpus);

}  // namespace conveyor
