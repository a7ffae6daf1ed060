// TokenCorpus: the formats it reads, every way a data file can be wrong, and the splits.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/common/error.hpp"
#include "kernels/data/token_corpus.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace conveyor;
using conveyor::testing::TempDir;

namespace {

std::string u16le(const std::vector<std::uint16_t>& ids) {
  std::string s;
  for (auto id : ids) s += static_cast<char>(id & 0xff), s += static_cast<char>(id >> 8);
  return s;
}

std::string u32le(const std::vector<TokenId>& ids) {
  std::string s;
  for (auto id : ids)
    for (int b = 0; b < 4; ++b) s += static_cast<char>((id >> (8 * b)) & 0xff);
  return s;
}

std::string llmc_header(std::int32_t version, std::int32_t count) {
  std::vector<std::int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = version;
  header[2] = count;
  return std::string(reinterpret_cast<const char*>(header.data()), 1024);
}

std::string llmc_file(std::int32_t version, std::int32_t count, const std::vector<std::uint16_t>& ids) {
  return llmc_header(version, count) + u16le(ids);
}

// The InputError message of f(), or a marker when f() does not throw one.
template <class F>
std::string input_error(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "<no InputError thrown>";
}

bool has(const std::string& msg, const std::string& part) { return msg.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a text corpus makes every byte a token") {
  TempDir dir;
  const auto path = dir.write("t.txt", std::string("Hi!\n\xff", 5));
  const auto c = TokenCorpus::load(path, DataFormat::text, 256);
  CHECK(c.tokens() == std::vector<TokenId>{'H', 'i', '!', '\n', 255});
}

TEST_CASE("the text format refuses a vocabulary below 256") {
  TempDir dir;
  const auto path = dir.write("t.txt", "abc");
  const auto msg = input_error([&] { TokenCorpus::load(path, DataFormat::text, 100); });
  INFO(msg);
  CHECK(has(msg, path));
  CHECK(has(msg, "model.vocab"));
  CHECK(has(msg, "256"));
  CHECK(has(msg, "100"));
}

TEST_CASE("raw uint16 tokens are read little-endian") {
  TempDir dir;
  const auto path = dir.write("t.bin", u16le({1, 256, 65535, 0}));
  const auto c = TokenCorpus::load(path, DataFormat::tokens, 65536);
  CHECK(c.tokens() == std::vector<TokenId>{1, 256, 65535, 0});
}

TEST_CASE("an llm.c file is recognised by its header and holds the counted tokens") {
  TempDir dir;
  const auto path = dir.write("t.bin", llmc_file(1, 3, {50256, 7, 9}));
  const auto c = TokenCorpus::load(path, DataFormat::tokens, 50257);
  CHECK(c.tokens() == std::vector<TokenId>{50256, 7, 9});
}

TEST_CASE("an llm.c file whose token count disagrees with its size is rejected") {
  TempDir dir;
  SUBCASE("fewer tokens than the header says: truncated") {
    const auto path = dir.write("short.bin", llmc_file(1, 5, {1, 2, 3}));
    const auto msg = input_error([&] { TokenCorpus::load(path, DataFormat::tokens, 50257); });
    INFO(msg);
    CHECK(has(msg, path));
    CHECK(has(msg, "truncated"));
    CHECK(has(msg, "5 tokens"));
  }
  SUBCASE("bytes after the counted tokens") {
    const auto path = dir.write("long.bin", llmc_file(1, 2, {1, 2, 3}));
    const auto msg = input_error([&] { TokenCorpus::load(path, DataFormat::tokens, 50257); });
    INFO(msg);
    CHECK(has(msg, path));
    CHECK(has(msg, "does not match the file size"));
  }
  SUBCASE("a header cut short") {
    const auto path = dir.write("cut.bin", llmc_file(1, 3, {1, 2, 3}).substr(0, 600));
    const auto msg = input_error([&] { TokenCorpus::load(path, DataFormat::tokens, 50257); });
    INFO(msg);
    CHECK(has(msg, path));
    CHECK(has(msg, "truncated"));
  }
  SUBCASE("an unknown version") {
    const auto path = dir.write("v3.bin", llmc_file(3, 3, {1, 2, 3}));
    const auto msg = input_error([&] { TokenCorpus::load(path, DataFormat::tokens, 50257); });
    INFO(msg);
    CHECK(has(msg, path));
    CHECK(has(msg, "version 3"));
    CHECK(has(msg, "not supported"));
  }
}

TEST_CASE("raw tokens of odd byte length are rejected") {
  TempDir dir;
  const auto path = dir.write("odd.bin", "abc");
  const auto msg = input_error([&] { TokenCorpus::load(path, DataFormat::tokens, 65536); });
  INFO(msg);
  CHECK(has(msg, path));
  CHECK(has(msg, "odd byte length 3"));
}

TEST_CASE("a token id at or above the vocabulary names the id, its position and model.vocab") {
  TempDir dir;
  const auto path = dir.write("t.bin", u16le({1, 2, 300, 4}));
  const auto msg = input_error([&] { TokenCorpus::load(path, DataFormat::tokens, 256); });
  INFO(msg);
  CHECK(has(msg, path));
  CHECK(has(msg, "token id 300"));
  CHECK(has(msg, "position 2"));
  CHECK(has(msg, "model.vocab 256"));
}

TEST_CASE("an empty data file is rejected in either format") {
  TempDir dir;
  const auto path = dir.write("empty.txt", "");
  for (auto format : {DataFormat::text, DataFormat::tokens}) {
    const auto msg = input_error([&] { TokenCorpus::load(path, format, 65536); });
    INFO(msg);
    CHECK(has(msg, path));
    CHECK(has(msg, "empty"));
  }
}

TEST_CASE("a data file larger than this machine's memory is refused up front, naming it") {
  TempDir dir;
  const auto path = dir.write("huge.bin", "");
  std::filesystem::resize_file(path, std::uintmax_t{1} << 40);  // 1 TiB, sparse: nothing is read
  for (auto format : {DataFormat::text, DataFormat::tokens}) {
    const auto msg = input_error([&] { TokenCorpus::load(path, format, 65536); });
    INFO(msg);
    CHECK(has(msg, path));
    CHECK(has(msg, "data file of 1024.0 GiB would be"));
    CHECK(has(msg, "more than this machine's"));
  }
}

TEST_CASE("a missing data file or a folder is named in the error") {
  TempDir dir;
  const auto missing = (dir.path() / "nope.txt").string();
  auto msg = input_error([&] { TokenCorpus::load(missing, DataFormat::text, 256); });
  INFO(msg);
  CHECK(has(msg, missing));
  CHECK(has(msg, "No such file"));
  CHECK(has(msg, "data.path"));
  msg = input_error([&] { TokenCorpus::load(dir.path().string(), DataFormat::text, 256); });
  CHECK(has(msg, "is a directory"));
}

TEST_CASE("a large token file loads completely") {
  TempDir dir;
  std::vector<std::uint16_t> ids(3'000'000);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::uint16_t>(i * 7919u);
  const auto path = dir.write("big.bin", u16le(ids));
  const auto c = TokenCorpus::load(path, DataFormat::tokens, 65536);
  CHECK(std::equal(c.tokens().begin(), c.tokens().end(), ids.begin(), ids.end()));
}

TEST_CASE("raw uint32 tokens above 65535 are read little-endian and round-trip") {
  TempDir dir;
  const std::vector<TokenId> ids = {0, 65535, 65536, 70000, 128255, 1, 0x01020304};
  const auto path = dir.write("t32.bin", u32le(ids));
  const auto c = TokenCorpus::load(path, DataFormat::tokens, 0x01020305, 4);
  CHECK(c.tokens() == ids);
}

TEST_CASE("the same ids load the same from a uint16 file and a uint32 file") {
  TempDir dir;
  std::vector<std::uint16_t> narrow(100'001);
  for (std::size_t i = 0; i < narrow.size(); ++i) narrow[i] = static_cast<std::uint16_t>(i * 40503u);
  const std::vector<TokenId> wide(narrow.begin(), narrow.end());
  const auto a = TokenCorpus::load(dir.write("a.bin", u16le(narrow)), DataFormat::tokens, 65536, 2);
  const auto b = TokenCorpus::load(dir.write("b.bin", u32le(wide)), DataFormat::tokens, 65536, 4);
  CHECK(a.tokens() == wide);
  CHECK(b.tokens() == wide);
}

TEST_CASE("an llm.c version 2 file holds uint32 tokens") {
  TempDir dir;
  const auto path = dir.write("v2.bin", llmc_header(2, 3) + u32le({128000, 7, 128255}));
  const auto c = TokenCorpus::load(path, DataFormat::tokens, 128256, 4);
  CHECK(c.tokens() == std::vector<TokenId>{128000, 7, 128255});
  SUBCASE("its token count is checked against 4 bytes a token") {
    const auto short_path = dir.write("v2short.bin", llmc_header(2, 4) + u32le({1, 2, 3}));
    const auto msg = input_error([&] { TokenCorpus::load(short_path, DataFormat::tokens, 128256, 4); });
    INFO(msg);
    CHECK(has(msg, short_path));
    CHECK(has(msg, "truncated"));
  }
}

TEST_CASE("an llm.c header that disagrees with data.token_bytes names both") {
  TempDir dir;
  SUBCASE("version 2 (uint32) read with data.token_bytes 2") {
    const auto path = dir.write("v2.bin", llmc_header(2, 3) + u32le({1, 2, 3}));
    const auto msg = input_error([&] { TokenCorpus::load(path, DataFormat::tokens, 50257, 2); });
    INFO(msg);
    CHECK(has(msg, path));
    CHECK(has(msg, "llm.c header version 2 holds uint32 tokens"));
    CHECK(has(msg, "data.token_bytes is 2"));
    CHECK(has(msg, "set data.token_bytes: 4"));
  }
  SUBCASE("version 1 (uint16) read with data.token_bytes 4") {
    const auto path = dir.write("v1.bin", llmc_file(1, 2, {1, 2}));
    const auto msg = input_error([&] { TokenCorpus::load(path, DataFormat::tokens, 50257, 4); });
    INFO(msg);
    CHECK(has(msg, path));
    CHECK(has(msg, "llm.c header version 1 holds uint16 tokens"));
    CHECK(has(msg, "data.token_bytes is 4"));
  }
}

TEST_CASE("raw uint32 tokens whose byte length is not a multiple of 4 are refused, naming the file") {
  TempDir dir;
  for (std::size_t bytes : {1, 2, 3, 6, 9}) {
    const auto path = dir.write("bad" + std::to_string(bytes) + ".bin", std::string(bytes, '\1'));
    const auto msg = input_error([&] { TokenCorpus::load(path, DataFormat::tokens, 1 << 20, 4); });
    INFO(msg);
    CHECK(has(msg, path));
    CHECK(has(msg, "byte length " + std::to_string(bytes) + " is not a multiple of 4"));
    CHECK(has(msg, "data.token_bytes 4"));
  }
}

TEST_CASE("a uint32 token id at or above the vocabulary names the id, its position and model.vocab") {
  TempDir dir;
  const auto path = dir.write("t32.bin", u32le({1, 70000, 2, 70001, 5}));
  const auto msg = input_error([&] { TokenCorpus::load(path, DataFormat::tokens, 70001, 4); });
  INFO(msg);
  CHECK(has(msg, path));
  CHECK(has(msg, "token id 70001"));
  CHECK(has(msg, "position 3"));
  CHECK(has(msg, "model.vocab 70001"));
  // An id that does not fit int32 is out of range for any vocabulary the config allows.
  const auto huge = dir.write("huge.bin", u32le({1, 0xffffffffu}));
  CHECK(has(input_error([&] { TokenCorpus::load(huge, DataFormat::tokens, 2147483647, 4); }),
            "token id 4294967295 at position 1"));
}

TEST_CASE("token_bytes other than 2 and 4, or 4 with a text corpus, are refused") {
  TempDir dir;
  const auto path = dir.write("t.txt", "abcd");
  CHECK(has(input_error([&] { TokenCorpus::load(path, DataFormat::tokens, 256, 3); }),
            "data.token_bytes must be 2 or 4, got 3"));
  const auto msg = input_error([&] { TokenCorpus::load(path, DataFormat::text, 256, 4); });
  CHECK(has(msg, path));
  CHECK(has(msg, "data.token_bytes 4"));
  CHECK(has(msg, "data.format text"));
}

TEST_CASE("a large uint32 token file loads completely") {
  TempDir dir;
  std::vector<TokenId> ids(1'000'000);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<TokenId>(i * 7919u) % 128256u;
  const auto path = dir.write("big32.bin", u32le(ids));
  const auto c = TokenCorpus::load(path, DataFormat::tokens, 128256, 4);
  CHECK(c.tokens() == ids);
}

TEST_CASE("the default corpus is English prose that a byte model can learn from") {
  const auto c = TokenCorpus::load(std::string(CONVEYOR_SOURCE_DIR) + "/data/tiny_corpus.txt",
                                   DataFormat::text, 256);
  CHECK(c.size() >= 200'000);
  CHECK(c.size() <= 600'000);
  const double h = unigram_entropy(c);
  CHECK(h > 2.5);  // English bytes: about 3 nats
  CHECK(h < 3.5);
}

TEST_CASE("split_corpus trains on the front and validates on the rest") {
  std::vector<TokenId> ids(1000, 1);
  const auto c = TokenCorpus::from_tokens(ids);
  const auto s = split_corpus(c, 0.1, 16);
  CHECK(s.train.begin == 0);
  CHECK(s.train.end == 900);
  CHECK(s.val.begin == 900);
  CHECK(s.val.end == 1000);
}

TEST_CASE("split_corpus rejects splits shorter than one window") {
  const auto c = TokenCorpus::from_tokens(std::vector<TokenId>(1000, 1));
  auto msg = input_error([&] { split_corpus(c, 0.01, 16); });
  INFO(msg);
  CHECK(has(msg, "data.val_fraction 0.01"));
  CHECK(has(msg, "validation split of 10 tokens"));
  CHECK(has(msg, "1000 tokens"));
  msg = input_error([&] { split_corpus(c, 0.99, 16); });
  CHECK(has(msg, "training split of 10 tokens"));
  msg = input_error([&] { split_corpus(c, 1.5, 16); });
  CHECK(has(msg, "data.val_fraction"));
  CHECK(has(msg, "1.5"));
}

TEST_CASE("unigram entropy is measured in nats") {
  CHECK(unigram_entropy(TokenCorpus::from_tokens({0, 1, 2, 3})) == doctest::Approx(std::log(4.0)));
  const double h = -(0.75 * std::log(0.75) + 0.25 * std::log(0.25));
  CHECK(unigram_entropy(TokenCorpus::from_tokens({5, 5, 5, 9})) == doctest::Approx(h));
  CHECK(unigram_entropy(TokenCorpus::from_tokens({7, 7})) == doctest::Approx(0.0));
  CHECK(unigram_entropy(TokenCorpus::from_tokens({})) == 0.0);
  // Ids above 65535, and ids too large for a table of counts, count the same.
  CHECK(unigram_entropy(TokenCorpus::from_tokens({70000, 70000, 70000, 128255})) == doctest::Approx(h));
  CHECK(unigram_entropy(TokenCorpus::from_tokens({0xfffffff0u, 0xfffffff0u, 0xfffffff0u, 3})) ==
        doctest::Approx(h));
}

TEST_CASE("data.format names parse back to their formats") {
  for (const auto& name : known_data_format_names()) {
    auto f = parse_data_format(name);
    REQUIRE(f.has_value());
    CHECK(data_format_name(*f) == name);
  }
  CHECK_FALSE(parse_data_format("csv").has_value());
}
