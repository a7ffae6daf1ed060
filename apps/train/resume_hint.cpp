#include "apps/train/resume_hint.hpp"

#include <algorithm>

namespace conveyor {

std::string shell_quote(const std::string& word) {
  const auto safe = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("@%+=:,./_-").find(c) != std::string_view::npos;
  };
  if (!word.empty() && std::all_of(word.begin(), word.end(), safe)) return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string resume_command(const std::string& config, const std::vector<std::string>& overrides,
                           const std::string& run_dir, const std::vector<std::string>& extra) {
  std::string line = "conveyor train " + shell_quote(config);
  for (const auto& o : overrides) line += " --set " + shell_quote(o);
  line += " --out " + shell_quote(run_dir) + " --resume latest";
  for (const auto& e : extra) line += " " + shell_quote(e);
  return line;
}

}  // namespace conveyor
