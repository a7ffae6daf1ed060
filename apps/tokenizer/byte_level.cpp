#include "apps/tokenizer/byte_level.hpp"

#include <array>

namespace conveyor::tokenizer {
namespace {

bool printable(int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

struct Tables {
  std::array<char32_t, 256> to_cp{};
  Tables() {
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) to_cp[static_cast<std::size_t>(b)] = printable(b) ? static_cast<char32_t>(b) : next++;
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_code_point(std::uint8_t byte) { return tables().to_cp[byte]; }

std::optional<std::uint8_t> code_point_to_byte(char32_t cp) {
  if (cp < 0x100) {
    if (printable(static_cast<int>(cp))) return static_cast<std::uint8_t>(cp);
    return std::nullopt;
  }
  for (int b = 0; b < 256; ++b)
    if (!printable(b) && tables().to_cp[static_cast<std::size_t>(b)] == cp) return static_cast<std::uint8_t>(b);
  return std::nullopt;
}

std::string utf8_encode(char32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

std::optional<std::u32string> utf8_decode(std::string_view s) {
  std::u32string out;
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    int n = 0;
    char32_t cp = 0;
    if (c < 0x80) { cp = c; n = 0; }
    else if ((c & 0xE0) == 0xC0) { cp = c & 0x1F; n = 1; }
    else if ((c & 0xF0) == 0xE0) { cp = c & 0x0F; n = 2; }
    else if ((c & 0xF8) == 0xF0) { cp = c & 0x07; n = 3; }
    else return std::nullopt;
    for (int k = 1; k <= n; ++k) {
      if (i + static_cast<std::size_t>(k) >= s.size()) return std::nullopt;
      const auto d = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
      if ((d & 0xC0) != 0x80) return std::nullopt;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr char32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return std::nullopt;  // overlong, surrogate
    out += cp;
    i += static_cast<std::size_t>(n) + 1;
  }
  return out;
}

std::string bytes_to_symbols(std::string_view bytes) {
  std::string s;
  for (char b : bytes) s += utf8_encode(byte_to_code_point(static_cast<std::uint8_t>(b)));
  return s;
}

std::optional<std::string> symbols_to_bytes(std::string_view symbols) {
  const auto cps = utf8_decode(symbols);
  if (!cps) return std::nullopt;
  std::string out;
  for (char32_t cp : *cps) {
    const auto b = code_point_to_byte(cp);
    if (!b) return std::nullopt;
    out += static_cast<char>(*b);
  }
  return out;
}

}  // namespace conveyor::tokenizer
