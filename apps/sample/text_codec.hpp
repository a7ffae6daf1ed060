#pragma once
// How `conveyor sample` turns a prompt into token ids and ids back into text:
//   bytes   a byte-level model (vocab 256, no tokenizer.json): each byte is its id (an id
//           above 255 decodes to U+FFFD)
//   bpe     a tokenizer.json (apps/tokenizer/): the post-processor's BOS, then the prompt's
//           ids; decoded to bytes (an id the tokenizer lacks, of a vocab padded beyond it,
//           to U+FFFD)
//   ids     neither: the prompt must be given as ids, and ids print as numbers
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "apps/tokenizer/bpe_tokenizer.hpp"

namespace conveyor {

class TextCodec {
 public:
  enum class Kind { bytes, bpe, ids };
  static TextCodec bytes() { return TextCodec(Kind::bytes, nullptr, ""); }
  static TextCodec ids() { return TextCodec(Kind::ids, nullptr, ""); }
  static TextCodec bpe(tokenizer::BpeTokenizer t, std::string path) {
    return TextCodec(Kind::bpe, std::make_shared<tokenizer::BpeTokenizer>(std::move(t)), std::move(path));
  }

  Kind kind() const { return kind_; }
  const char* name() const;
  /// The tokenizer.json read (bpe), else empty.
  const std::string& tokenizer_path() const { return path_; }
  /// The prompt's ids; nullopt for `ids`, which has no text encoding.
  std::optional<std::vector<std::int32_t>> encode(const std::string& prompt) const;
  /// Text (bytes, bpe: possibly ending inside a UTF-8 character) or ids as "12 7 99".
  std::string decode(std::span<const std::int32_t> ids) const;

 private:
  TextCodec(Kind k, std::shared_ptr<const tokenizer::BpeTokenizer> t, std::string path)
      : kind_(k), bpe_(std::move(t)), path_(std::move(path)) {}
  Kind kind_;
  std::shared_ptr<const tokenizer::BpeTokenizer> bpe_;
  std::string path_;
};

}  // namespace conveyor
