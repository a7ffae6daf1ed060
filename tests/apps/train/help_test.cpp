// `conveyor --help` and `conveyor train --help` print their usage on stdout and succeed;
// `conveyor` alone is a usage error with a message, not a silent success.
#include <doctest/doctest.h>

#include <string>

#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor::testing;

namespace {
bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}
}  // namespace

TEST_CASE("conveyor --help lists the subcommands on stdout and exits 0") {
  const CommandResult r = run_conveyor({"--help"}, 30);
  INFO("stdout: " << r.out);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "Usage"));
  CHECK(contains(r.out, "train"));
}

TEST_CASE("conveyor train --help lists its options on stdout and exits 0") {
  const CommandResult r = run_conveyor({"train", "--help"}, 30);
  INFO("stdout: " << r.out);
  CHECK(r.exit_code == 0);
  for (const char* option : {"--set", "--out", "--format"}) {
    CAPTURE(option);
    CHECK(contains(r.out, option));
  }
}

TEST_CASE("conveyor without a subcommand exits non-zero with a message") {
  TempDir dir;  // so that nothing it might write lands in the source tree
  const CommandResult r = run_conveyor({}, 30, dir.path().string());
  INFO("stderr: " << r.err);
  CHECK(r.exit_code != 0);
  CHECK_FALSE(r.err.empty());
  CHECK(r.out.empty());
  CHECK(fs::is_empty(dir.path()));
}
