#pragma once
// The pre-tokenizer of a byte-level BPE tokenizer.json: text cut into the pieces that BPE
// merges within (never across), as Hugging Face's `tokenizers` cuts them. Covered:
//   {"type": "ByteLevel", "add_prefix_space": b, "use_regex": b}   GPT-2's: with use_regex,
//       cut by GPT-2's pattern (kGpt2Pattern); add_prefix_space puts a space before each piece
//       it is given that does not start with one. (The byte mapping itself is the model's step.)
//   {"type": "Split", "pattern": {"Regex": R} | {"String": S}, "behavior": "Isolated" |
//       "Removed", "invert": b}   Llama 3's (Isolated): matches and the gaps between them
//       are pieces; Removed drops the matches, or with invert the gaps (GPT-4-style files).
//   {"type": "Sequence", "pretokenizers": [...]}   each step cuts every piece of the last.
// Anything else is refused by from_json (std::invalid_argument naming the type or option).
//
// The patterns run on ICU's regex engine over UTF-8 (Unicode 15 properties in Debian 12's
// ICU 72): \p{L}, \p{N}, lookahead (?!\S), case-insensitive groups (?i:...) and counted
// repeats \p{N}{1,3} are ICU's as they are Oniguruma's (what `tokenizers` uses). One
// difference is removed: ICU's \s is [\t\n\f\r\p{Z}], Oniguruma's the White_Space
// property (which adds \v and U+0085), so \s and \S are rewritten as \p{White_Space} and
// \P{White_Space} before compiling. Unicode versions may still differ at the margins (code
// points assigned after ICU 72's Unicode 15).
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace conveyor::tokenizer {

/// GPT-2's split (tokenizers' ByteLevel with use_regex).
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

/// One compiled pattern (ICU), splitting UTF-8 text.
class RegexSplitter {
 public:
  /// Throws std::invalid_argument with ICU's error and its offset on a bad pattern.
  explicit RegexSplitter(std::string_view pattern, bool literal = false);
  ~RegexSplitter();
  RegexSplitter(RegexSplitter&&) noexcept;
  RegexSplitter& operator=(RegexSplitter&&) noexcept;
  /// Matches and the gaps between them, in order, each kind only when kept. Every byte of
  /// `text` is in one piece when both are kept.
  std::vector<std::string> split(std::string_view text, bool keep_matches, bool keep_gaps) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class PreTokenizer {
 public:
  /// A tokenizer.json's "pre_tokenizer" (null: the text is one piece).
  static PreTokenizer from_json(const nlohmann::json& j);
  std::vector<std::string> split(std::string_view text) const;

 private:
  struct Step {
    bool add_prefix_space = false;
    std::shared_ptr<RegexSplitter> regex;  // null: no cut
    bool keep_matches = true, keep_gaps = true;
  };
  static void add_steps(const nlohmann::json& j, std::vector<Step>& out);
  std::vector<Step> steps_;
};

}  // namespace conveyor::tokenizer
