#pragma once
// What a user typed, as it may appear inside an error message. A message is one line
// (scripts read the last line of stderr) and short: a value with newlines, or one of
// 50 MB, must neither break the line nor flood the terminal.
#include <cstddef>
#include <string>
#include <string_view>

namespace conveyor {

/// `text` with control characters escaped (\n, \r, \t, \xNN) and, past `max_bytes`,
/// cut at a character boundary and ended with "… (N bytes)" giving the whole length.
std::string printable_excerpt(std::string_view text, std::size_t max_bytes = 80);

/// An error message as one line: control characters escaped, at most `max_bytes`
/// (a message that long is a bug of its own, but it must still be one line).
std::string one_line_message(std::string_view text, std::size_t max_bytes = 4096);

}  // namespace conveyor
