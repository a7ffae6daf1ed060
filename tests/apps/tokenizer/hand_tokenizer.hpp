#pragma once
// A byte-level BPE tokenizer.json small enough to work out by hand, GPT-2's layout
// (ByteLevel pre-tokenizer with its regex, ByteLevel decoder). Its vocabulary: ids 0..255
// are the 256 bytes (id = the byte's value, its string the byte alphabet's symbol), then
//   rank  merge        → token  id
//   0     Ġ t          → Ġt     256
//   1     h e          → he     257
//   2     Ġt he        → Ġthe   258
//   3     i n          → in     259
//   4     1 2          → 12     260
//   5     ' s          → 's     261
//   6     Ġ Ġ          → ĠĠ     263
//   7     Ġ b          → Ġb     264
//   8     Ã ©          → Ã©     265   (é: bytes C3 A9)
//   9     h Ã©         → hÃ©    266
// and the added special token <|end|> = 262: 267 tokens.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/tokenizer/byte_level.hpp"

namespace conveyor::tokenizer::testing {

inline nlohmann::json hand_tokenizer_json() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[utf8_encode(byte_to_code_point(static_cast<std::uint8_t>(b)))] = b;
  const std::vector<std::pair<std::string, int>> merged = {
      {"Ġt", 256}, {"he", 257}, {"Ġthe", 258}, {"in", 259}, {"12", 260}, {"'s", 261},
      {"ĠĠ", 263}, {"Ġb", 264}, {"Ã©", 265},  {"hÃ©", 266}};
  for (const auto& [token, id] : merged) vocab[token] = id;
  return {
      {"version", "1.0"},
      {"added_tokens", {{{"id", 262}, {"content", "<|end|>"}, {"special", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
      {"post_processor", {{"type", "ByteLevel"}, {"trim_offsets", false}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", {"Ġ t", "h e", "Ġt he", "i n", "1 2", "' s", "Ġ Ġ", "Ġ b", "Ã ©", "h Ã©"}}}}};
}

}  // namespace conveyor::tokenizer::testing
