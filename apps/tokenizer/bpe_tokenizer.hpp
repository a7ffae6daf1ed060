#pragma once
// A byte-level BPE tokenizer read from a Hugging Face tokenizer.json (GPT-2's, Llama 3's,
// or one `tokenizers` trains with ByteLevel), encoding and decoding as `tokenizers` does:
//   encode  1. the text is cut at its added tokens (tokenizer.json's "added_tokens":
//              special or not; at each position the longest that matches, leftmost first);
//              each is its id.
//           2. the rest goes through the pre-tokenizer (pre_tokenizer.hpp) into pieces.
//           3. each piece's bytes become symbols of the byte alphabet (byte_level.hpp);
//              with model.ignore_merges (Llama 3) a piece found whole in model.vocab is that
//              id; otherwise adjacent symbols are merged, the pair of lowest rank in
//              model.merges first (the leftmost of equal pairs), until no pair has a rank;
//              each symbol left is its id in model.vocab.
//   decode  each id's string (a vocab token's symbols back to bytes; an added token's
//           content likewise when it is all in the byte alphabet, else as it is, as the
//           ByteLevel decoder does), concatenated: bytes, which may end inside a UTF-8
//           character. Special tokens are kept (skip_special_tokens=False).
// The post-processor's template (Llama 3's <|begin_of_text|>) is not part of encode():
// bos_ids() gives the special tokens it puts before a single sequence.
// Refused with std::invalid_argument naming the field: a model other than BPE, byte
// fallback (SentencePiece-style Llama 2), a normalizer, a decoder other than ByteLevel, a
// pre-tokenizer pre_tokenizer.hpp does not cover, and a merge of unknown symbols. Added
// tokens' lstrip/rstrip/single_word options are not applied.
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/tokenizer/pre_tokenizer.hpp"

namespace conveyor::tokenizer {

class BpeTokenizer {
 public:
  /// tokenizer.json's content. Throws std::invalid_argument as above.
  static BpeTokenizer from_json(const nlohmann::json& j);
  /// Reads and parses a tokenizer.json; throws std::invalid_argument naming the path.
  static BpeTokenizer from_file(const std::string& path);

  std::vector<std::int32_t> encode(std::string_view text) const;
  std::string decode(std::span<const std::int32_t> ids) const;
  /// The special tokens the post-processor puts before a single sequence (Llama 3:
  /// <|begin_of_text|>; GPT-2: none).
  const std::vector<std::int32_t>& bos_ids() const { return bos_; }
  /// One more than the largest id (vocab and added tokens).
  std::int64_t size() const { return size_; }
  /// The id of a token's string (vocab's symbols, or an added token's content).
  std::optional<std::int32_t> id_of(const std::string& token) const;

 private:
  std::vector<std::int32_t> encode_piece(const std::string& piece) const;
  std::unordered_map<std::string, std::int32_t> vocab_;
  std::unordered_map<std::int32_t, std::string> id_to_token_;  // vocab's, in symbols
  std::map<std::pair<std::string, std::string>, std::int32_t> merge_rank_;
  std::vector<std::pair<std::string, std::int32_t>> added_;  // content, id; longest first
  std::unordered_map<std::int32_t, std::string> added_by_id_;
  PreTokenizer pre_;
  bool ignore_merges_ = false;
  std::vector<std::int32_t> bos_;
  std::int64_t size_ = 0;
};

}  // namespace conveyor::tokenizer
