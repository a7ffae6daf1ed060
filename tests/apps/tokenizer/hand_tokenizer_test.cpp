// A byte-level BPE tokenizer.json small enough to work out by hand (hand_tokenizer.hpp: its
// vocabulary and merges), GPT-2's pre-tokenizer (ByteLevel, use_regex): the expected ids
// below are derived in the comments, not taken from the code under test.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "apps/tokenizer/bpe_tokenizer.hpp"
#include "apps/tokenizer/byte_level.hpp"
#include "tests/apps/tokenizer/hand_tokenizer.hpp"

namespace conveyor::tokenizer {
namespace {

using testing::hand_tokenizer_json;

struct HandCase {
  std::string text;
  std::vector<std::int32_t> ids;
};

// Each: the pieces GPT-2's pattern cuts, then the merges within each piece.
const std::vector<HandCase>& hand_cases() {
  static const std::vector<HandCase> cases = {
      // "the" | " cat": t h e → (h e) → t he = 116 257; Ġ c a t: no merge = 32 99 97 116.
      {"the cat", {116, 257, 32, 99, 97, 116}},
      // " the": Ġ t h e → (Ġ t) rank 0 → Ġt h e → (h e) → Ġt he → (Ġt he) → Ġthe = 258.
      {" the", {258}},
      // "it" | "'s" (a contraction of its own): i t = 105 116; ' s → 's = 261.
      {"it's", {105, 116, 261}},
      // "12345" is one \p{N}+ piece: 1 2 3 4 5 → 12 3 4 5 = 260 51 52 53.
      {"12345", {260, 51, 52, 53}},
      // "a" | "  " | " b": \s+(?!\S) leaves the run's last space to the word after it:
      // ĠĠ = 263, Ġb = 264. (Cut as "   " | "b" it would be 263 32 98.)
      {"a   b", {97, 263, 264}},
      // "héllo" is one \p{L}+ piece (é a letter): h Ã © l l o → (Ã ©) → (h Ã©) → 266 108 108 111;
      // " wörld": ö is C3 B6, no merge = 32 119 195 182 114 108 100.
      {"h\xC3\xA9llo w\xC3\xB6rld", {266, 108, 108, 111, 32, 119, 195, 182, 114, 108, 100}},
      // "hi" | " 👋!" (one ?[^\s\p{L}\p{N}]+ piece): 👋 is F0 9F 91 8B.
      {"hi \xF0\x9F\x91\x8B!", {104, 105, 32, 240, 159, 145, 139, 33}},
      // The added token cuts the text first: "the" | <|end|> | " the".
      {"the<|end|> the", {116, 257, 262, 258}},
      // "a" | "\n" | "b": a lone newline before a letter is \s+, not \s+(?!\S).
      {"a\nb", {97, 10, 98}},
      // GPT-2's contractions are lower case: "IT" | "'" | "S" ("'" a ?[^\s\p{L}\p{N}]+
      // piece, as "'S" is not 's): 73 84 39 83.
      {"IT'S", {73, 84, 39, 83}},
  };
  return cases;
}

}  // namespace

TEST_CASE("a hand-made byte-level BPE encodes to the ids worked out by hand") {
  const BpeTokenizer t = BpeTokenizer::from_json(hand_tokenizer_json());
  CHECK(t.size() == 267);
  CHECK(t.bos_ids().empty());
  for (const HandCase& c : hand_cases()) {
    CAPTURE(c.text);
    CHECK(t.encode(c.text) == c.ids);
    CHECK(t.decode(c.ids) == c.text);
  }
}

TEST_CASE("byte-level BPE decodes any ids to their bytes, also a cut UTF-8 character") {
  const BpeTokenizer t = BpeTokenizer::from_json(hand_tokenizer_json());
  const std::vector<std::int32_t> half_emoji{104, 240, 159};  // 'h' and two of 👋's four bytes
  CHECK(t.decode(half_emoji) == "h\xF0\x9F");
  CHECK_THROWS_AS(t.decode(std::vector<std::int32_t>{267}), std::invalid_argument);
}

TEST_CASE("a tokenizer.json that is not byte-level BPE is refused, naming the field") {
  nlohmann::json j = hand_tokenizer_json();
  j["normalizer"] = {{"type", "NFC"}};
  CHECK_THROWS_WITH_AS(BpeTokenizer::from_json(j), doctest::Contains("normalizer NFC"), std::invalid_argument);
  j = hand_tokenizer_json();
  j["model"]["byte_fallback"] = true;
  CHECK_THROWS_WITH_AS(BpeTokenizer::from_json(j), doctest::Contains("byte_fallback"), std::invalid_argument);
  j = hand_tokenizer_json();
  j["pre_tokenizer"] = {{"type", "Metaspace"}};
  CHECK_THROWS_WITH_AS(BpeTokenizer::from_json(j), doctest::Contains("Metaspace"), std::invalid_argument);
  j = hand_tokenizer_json();
  j["model"]["merges"].push_back("x y");
  CHECK_THROWS_WITH_AS(BpeTokenizer::from_json(j), doctest::Contains("not in model.vocab"), std::invalid_argument);
}

TEST_CASE("Llama 3's split, merges in pair form, ignore_merges and the template's BOS") {
  // Llama 3's pre-tokenizer: a Split by its pattern, then ByteLevel without its own regex.
  nlohmann::json j = hand_tokenizer_json();
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"},
         {"pattern",
          {{"Regex",
            R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
         {"behavior", "Isolated"},
         {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  nlohmann::json pairs = nlohmann::json::array();
  for (const auto& m : j["model"]["merges"]) {
    const std::string s = m.get<std::string>();
    pairs.push_back({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
  }
  j["model"]["merges"] = pairs;
  j["added_tokens"].push_back({{"id", 267}, {"content", "<|begin_of_text|>"}, {"special", true}});
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"special_tokens", {{"<|begin_of_text|>", {{"id", "<|begin_of_text|>"}, {"ids", {267}}, {"tokens", {"<|begin_of_text|>"}}}}}}};
  BpeTokenizer t = BpeTokenizer::from_json(j);
  CHECK(t.bos_ids() == std::vector<std::int32_t>{267});
  // Digits in threes: "121" | "2" → 12 1 | 2 = 260 49 50, where GPT-2's one "1212" piece
  // would be 12 12 = 260 260.
  CHECK(t.encode("1212") == std::vector<std::int32_t>{260, 49, 50});
  CHECK(t.encode("it's") == std::vector<std::int32_t>{105, 116, 261});
  // [^\r\n\p{L}\p{N}]?\p{L}+ takes one non-letter into the word: "!the" → ! t he; " the" → Ġthe.
  CHECK(t.encode("!the the") == std::vector<std::int32_t>{33, 116, 257, 258});
  // The same split written GPT-4's way (Removed, invert): the pieces are the same.
  nlohmann::json inverted = j;
  inverted["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
  inverted["pre_tokenizer"]["pretokenizers"][0]["invert"] = true;
  CHECK(BpeTokenizer::from_json(inverted).encode("1212 it's!the the") == t.encode("1212 it's!the the"));
  // Removed without invert drops the matches, and this pattern matches every character.
  inverted["pre_tokenizer"]["pretokenizers"][0]["invert"] = false;
  CHECK(BpeTokenizer::from_json(inverted).encode("ab 12").empty());
  // ignore_merges: a piece that is a vocab token is that token, merges or not. "hÃ©" has
  // the merges h Ã© too; with no merge "Ġthe" would still be one token.
  j["model"]["ignore_merges"] = true;
  j["model"]["merges"] = nlohmann::json::array();
  t = BpeTokenizer::from_json(j);
  CHECK(t.encode(" the") == std::vector<std::int32_t>{258});
  CHECK(t.encode(" them") == std::vector<std::int32_t>{32, 116, 104, 101, 109});  // no merges left
}

}  // namespace conveyor::tokenizer
