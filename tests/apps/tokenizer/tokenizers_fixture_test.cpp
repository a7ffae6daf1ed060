// conveyor's byte-level BPE against Hugging Face's `tokenizers`: the ids and decoded text
// that package gave for each text of tests/data/tokenizer/cases.json, on the tokenizer.json
// files beside it. Made on the GPU machine (where the package is) by
// scripts/make_tokenizer_fixture.py; the command that made it is in cases.json's "command".
// Without cases.json the test says so and passes (the fixture is not made yet).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "apps/tokenizer/bpe_tokenizer.hpp"

namespace conveyor::tokenizer {

TEST_CASE("byte-level BPE encodes and decodes as the tokenizers package does (tests/data/tokenizer)") {
  const std::filesystem::path dir = std::filesystem::path(CONVEYOR_SOURCE_DIR) / "tests/data/tokenizer";
  const auto cases_file = dir / "cases.json";
  if (!std::filesystem::exists(cases_file)) {
    MESSAGE("skipped: " << cases_file.string()
                        << " is absent; make it on a machine with the tokenizers package: "
                           "python3 scripts/make_tokenizer_fixture.py --out tests/data/tokenizer");
    return;
  }
  std::ifstream in(cases_file);
  const nlohmann::json fixture = nlohmann::json::parse(in);
  MESSAGE("fixture made by: " << fixture.value("command", std::string("?")) << " (tokenizers "
                              << fixture.value("tokenizers_version", std::string("?")) << ")");
  int compared = 0;
  for (const auto& set : fixture.at("sets")) {
    const std::string file = set.at("tokenizer").get<std::string>();
    CAPTURE(file);
    const BpeTokenizer t = BpeTokenizer::from_file((dir / file).string());
    for (const auto& c : set.at("cases")) {
      const std::string text = c.at("text").get<std::string>();
      const auto ids = c.at("ids").get<std::vector<std::int32_t>>();
      CAPTURE(text);
      CHECK(t.encode(text) == ids);
      CHECK(t.decode(ids) == c.at("decoded").get<std::string>());
      ++compared;
    }
    if (set.contains("bos_ids")) CHECK(t.bos_ids() == set.at("bos_ids").get<std::vector<std::int32_t>>());
  }
  CHECK(compared > 0);
  MESSAGE(compared << " texts compared");
}

}  // namespace conveyor::tokenizer
