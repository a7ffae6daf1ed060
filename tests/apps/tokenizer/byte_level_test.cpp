// The byte alphabet of byte-level BPE against GPT-2's bytes_to_unicode, worked out by hand:
// the printable bytes stand for themselves, the 68 others are U+0100.. in byte order
// (0x00..0x20 → U+0100..U+0120, 0x7F → U+0121, 0x80..0xA0 → U+0122..U+0142, 0xAD → U+0143).
#include <doctest/doctest.h>

#include <random>
#include <set>

#include "apps/tokenizer/byte_level.hpp"

namespace conveyor::tokenizer {

TEST_CASE("the byte alphabet is GPT-2's bytes_to_unicode") {
  CHECK(byte_to_code_point('!') == U'!');
  CHECK(byte_to_code_point('~') == U'~');
  CHECK(byte_to_code_point(0xA1) == 0xA1);
  CHECK(byte_to_code_point(0xFF) == 0xFF);
  CHECK(byte_to_code_point(0x00) == 0x100);
  CHECK(byte_to_code_point('\n') == 0x10A);  // 'Ċ'
  CHECK(byte_to_code_point(' ') == 0x120);   // 'Ġ'
  CHECK(byte_to_code_point(0x7F) == 0x121);
  CHECK(byte_to_code_point(0x80) == 0x122);
  CHECK(byte_to_code_point(0xA0) == 0x142);
  CHECK(byte_to_code_point(0xAD) == 0x143);
  std::set<char32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const char32_t cp = byte_to_code_point(static_cast<std::uint8_t>(b));
    seen.insert(cp);
    CHECK(code_point_to_byte(cp) == static_cast<std::uint8_t>(b));
  }
  CHECK(seen.size() == 256);
  CHECK(*seen.rbegin() == 0x143);
  CHECK_FALSE(code_point_to_byte(0x144).has_value());
  CHECK_FALSE(code_point_to_byte(U' ').has_value());  // the space is 'Ġ', never itself
}

TEST_CASE("any bytes go to symbols and back, and foreign symbols are refused") {
  std::mt19937_64 rng(std::random_device{}());
  for (int round = 0; round < 50; ++round) {
    std::string bytes(rng() % 40, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() % 256);
    CHECK(symbols_to_bytes(bytes_to_symbols(bytes)) == bytes);
  }
  CHECK(bytes_to_symbols(" the\n") == "\xC4\xA0the\xC4\x8A");  // "ĠtheĊ"
  CHECK_FALSE(symbols_to_bytes("a b").has_value());            // a raw space
  CHECK_FALSE(symbols_to_bytes("\xE4\xB8\xAD").has_value());  // '中' is not in the alphabet
  CHECK_FALSE(symbols_to_bytes("\xC4").has_value());           // cut UTF-8
}

TEST_CASE("UTF-8 decoding refuses what is not UTF-8") {
  CHECK(utf8_decode("h\xC3\xA9\xF0\x9F\x91\x8B") == std::u32string{U'h', 0xE9, 0x1F44B});
  CHECK_FALSE(utf8_decode("\xC0\xAF").has_value());          // overlong '/'
  CHECK_FALSE(utf8_decode("\xED\xA0\x80").has_value());      // a surrogate
  CHECK_FALSE(utf8_decode("\xF0\x9F\x91").has_value());      // cut short
  CHECK_FALSE(utf8_decode("\x80").has_value());              // a lone continuation byte
  for (char32_t cp : {char32_t{0x24}, char32_t{0xA2}, char32_t{0x20AC}, char32_t{0x10348}})
    CHECK(utf8_decode(utf8_encode(cp)) == std::u32string{cp});
}

}  // namespace conveyor::tokenizer
