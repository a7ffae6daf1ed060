#pragma once
// Byte-level BPE's alphabet (GPT-2's bytes_to_unicode, which Llama 3's tokenizer.json keeps):
// every byte is one printable code point, so that a token's string in vocab and merges is
// text. The 188 printable bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves; the
// other 68 (controls, space, 0x7F..0xA0, 0xAD) are U+0100.. in increasing byte order, so
// the space is 'Ġ' (U+0120) and the newline 'Ċ' (U+010A).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace conveyor::tokenizer {

/// The code point that stands for `byte`.
char32_t byte_to_code_point(std::uint8_t byte);
/// The byte a code point stands for, or nullopt for one outside the alphabet.
std::optional<std::uint8_t> code_point_to_byte(char32_t cp);

/// `bytes` in the alphabet, as UTF-8 (what vocab's keys are made of).
std::string bytes_to_symbols(std::string_view bytes);
/// The bytes a string of the alphabet (UTF-8) stands for; nullopt when it holds a code
/// point outside the alphabet or is not UTF-8.
std::optional<std::string> symbols_to_bytes(std::string_view symbols);

/// UTF-8 of one code point (REQUIRES: cp <= 0x10FFFF).
std::string utf8_encode(char32_t cp);
/// The code points of `s`, or nullopt when it is not UTF-8.
std::optional<std::u32string> utf8_decode(std::string_view s);

}  // namespace conveyor::tokenizer
