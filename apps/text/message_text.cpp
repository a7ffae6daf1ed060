#include "apps/text/message_text.hpp"

#include <fmt/format.h>

namespace conveyor {
namespace {

void append_escaped(std::string& out, char c) {
  switch (c) {
    case '\n': out += "\\n"; return;
    case '\r': out += "\\r"; return;
    case '\t': out += "\\t"; return;
    default: break;
  }
  const auto byte = static_cast<unsigned char>(c);
  if (byte < 0x20 || byte == 0x7f) {
    out += fmt::format("\\x{:02x}", byte);
    return;
  }
  out += c;
}

// The largest cut <= `at` that does not split a UTF-8 sequence (continuation bytes are
// 10xxxxxx): a cut message must still be valid text.
std::size_t character_boundary(std::string_view text, std::size_t at) {
  while (at > 0 && at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) --at;
  return at;
}

}  // namespace

std::string printable_excerpt(std::string_view text, std::size_t max_bytes) {
  const std::size_t cut = text.size() > max_bytes ? character_boundary(text, max_bytes) : text.size();
  std::string out;
  out.reserve(cut + 24);
  for (std::size_t i = 0; i < cut; ++i) append_escaped(out, text[i]);
  if (cut < text.size()) out += fmt::format("… ({} bytes)", text.size());
  return out;
}

std::string one_line_message(std::string_view text, std::size_t max_bytes) {
  while (!text.empty() && text.back() == '\n') text.remove_suffix(1);  // a trailing newline is no break
  return printable_excerpt(text, max_bytes);
}

}  // namespace conveyor
