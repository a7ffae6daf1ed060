#pragma once
// A training corpus held in memory as token ids.
// Formats (`data.format`):
//   text   - any file of bytes; each byte is a token (needs model.vocab >= 256).
//   tokens - raw little-endian token ids of `data.token_bytes` bytes each: 2 (uint16, as
//            nanoGPT's prepare scripts write them) or 4 (uint32, for vocabularies above
//            65536 such as Llama 3's 128256); or llm.c's .bin files, recognised by a
//            1024-byte header of 256 int32 LE whose first is the magic 20240520 (second:
//            version, 1 = uint16 tokens, 2 = uint32 tokens; third: the token count, which
//            must match the file size exactly). The header's width must agree with
//            data.token_bytes: the config states what the run reads.
// In memory every id is a TokenId (uint32), whatever the file's width: one type for the
// sampler and everything after it. A uint16 file takes twice its size in memory, a text
// file four times.
// Every token id is checked against the model's vocabulary when loading.
// A file is read in one call into its final buffer and widened there in place: a 100 MB
// corpus loads in well under a second and needs no more memory than its tokens.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor {

enum class DataFormat { text, tokens };

/// One token id as the corpus holds it: wide enough for any vocabulary that fits the
/// sampler's i32 token tensors.
using TokenId = std::uint32_t;

/// "text" | "tokens": the spelling of `data.format` in configs.
std::string_view data_format_name(DataFormat format);
/// The inverse of data_format_name; nullopt for an unknown name.
std::optional<DataFormat> parse_data_format(std::string_view name);
/// Every accepted `data.format` name, in a fixed order (for error messages and --help).
const std::vector<std::string>& known_data_format_names();

class TokenCorpus {
 public:
  /// `token_bytes` (data.token_bytes) is the width of one id in a tokens file, 2 or 4;
  /// data.format text wants 2 (a byte is a token).
  /// Throws InputError naming the file: missing, unreadable, empty, a length that is not
  /// a whole number of ids, a bad llm.c header or one whose width disagrees with
  /// token_bytes (naming both), a token id >= vocab (naming the id, its position and the
  /// vocab), or token_bytes other than 2 and 4 (or 4 with text).
  static TokenCorpus load(const std::string& path, DataFormat format, std::int64_t vocab,
                          int token_bytes = 2);
  static TokenCorpus from_tokens(std::vector<TokenId> tokens);

  const std::vector<TokenId>& tokens() const { return tokens_; }
  std::size_t size() const { return tokens_.size(); }

 private:
  std::vector<TokenId> tokens_;
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
