// metrics.jsonl read while train appends to it: whole lines only, a half-written last line
// kept back until its newline, and a file that shrank read again from its start.
#include <doctest/doctest.h>

#include <fstream>

#include "apps/watch/jsonl_tail.hpp"
#include "tests/support/temp_dir.hpp"

using conveyor::testing::TempDir;
using conveyor::watch::JsonlTail;

namespace {

void append(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::app | std::ios::binary);
  out << text;
}

}  // namespace

TEST_CASE("a tail returns nothing until the file exists") {
  TempDir dir;
  JsonlTail tail(dir / "metrics.jsonl");
  const auto got = tail.read();
  CHECK(got.lines.empty());
  CHECK_FALSE(got.restarted);
}

TEST_CASE("a tail keeps a half-written last line back until its newline comes") {
  TempDir dir;
  const std::string file = dir / "metrics.jsonl";
  JsonlTail tail(file);
  append(file, "{\"step\":0}\n{\"st");
  auto got = tail.read();
  REQUIRE(got.lines.size() == 1);
  CHECK(got.lines[0] == "{\"step\":0}");
  CHECK(tail.read().lines.empty());  // nothing new: the half line stays back
  append(file, "ep\":1}\n");
  got = tail.read();
  REQUIRE(got.lines.size() == 1);
  CHECK(got.lines[0] == "{\"step\":1}");
}

TEST_CASE("a tail reads a file that shrank again from its start and says so") {
  TempDir dir;
  const std::string file = dir / "metrics.jsonl";
  JsonlTail tail(file);
  append(file, "{\"step\":0}\n{\"step\":1}\n");
  CHECK(tail.read().lines.size() == 2);
  std::ofstream(file, std::ios::trunc | std::ios::binary) << "{\"a\":1}\n";
  const auto got = tail.read();
  CHECK(got.restarted);
  REQUIRE(got.lines.size() == 1);
  CHECK(got.lines[0] == "{\"a\":1}");
}

TEST_CASE("a tail reads at most the bytes it is given per call and the rest next time") {
  TempDir dir;
  const std::string file = dir / "metrics.jsonl";
  JsonlTail tail(file);
  append(file, "aaaa\nbbbb\n");
  const auto first = tail.read(7);
  CHECK(first.lines == std::vector<std::string>{"aaaa"});
  CHECK(first.more);
  const auto second = tail.read(7);
  CHECK(second.lines == std::vector<std::string>{"bbbb"});
  CHECK_FALSE(second.more);
}
