// README.md's table of configuration keys is what `conveyor config --keys --markdown`
// prints: a key added, renamed or re-described in config_keys.cpp without the README
// fails here (the tests run in the source directory).
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "apps/config/config_keys.hpp"
#include "apps/config/config_rules.hpp"

namespace {

// The rows of a Markdown key table: lines that start with "| `".
std::vector<std::string> key_rows(std::istream& in) {
  std::vector<std::string> rows;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("| `", 0) == 0) rows.push_back(line);
  return rows;
}

}  // namespace

TEST_CASE("README's configuration table is config --keys --markdown's, row for row") {
  std::ifstream readme("README.md");
  REQUIRE_MESSAGE(readme.good(), "README.md not found in the working directory");
  std::vector<std::string> in_readme = key_rows(readme);
  std::istringstream generated(conveyor::config_reference(/*markdown=*/true));
  const std::vector<std::string> want = key_rows(generated);
  REQUIRE(want.size() > 20);
  // The README's key table is the run of rows that starts at the first key's row (other
  // tables, of folders or commands, also start rows with a backquote).
  std::size_t start = 0;
  while (start < in_readme.size() && in_readme[start] != want.front()) ++start;
  REQUIRE_MESSAGE(start < in_readme.size(), "README.md lacks the row: " << want.front());
  for (std::size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    REQUIRE_MESSAGE(start + i < in_readme.size(), "README.md lacks the row: " << want[i]);
    CHECK(in_readme[start + i] == want[i]);
  }
}

TEST_CASE("config --keys opens with its columns and the integer bound that README states above its table") {
  const std::string text = conveyor::config_reference();
  const std::string bound = "every integer key also stops at " + std::to_string(conveyor::config_rules::kMaxConfigInteger) +
                            " (the runtime counts in 32 bits)";
  CHECK(text.substr(0, text.find('\n')) == "# key, default, meaning [allowed values]; " + bound);
  std::ifstream readme("README.md");
  REQUIRE(readme.good());
  std::ostringstream all;
  all << readme.rdbuf();
  std::string flat = all.str();  // README wraps its lines
  for (auto& c : flat)
    if (c == '\n') c = ' ';
  CHECK(flat.find("Every " + bound.substr(6) + ":") != std::string::npos);
}
