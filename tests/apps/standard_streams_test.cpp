// The binary with its standard streams closed or unwritable (through /bin/sh, which
// closes or redirects them before exec): a run started with fds 1 and 2 closed trains and
// writes well-formed files (the fds it would have reused are /dev/null), and output that
// cannot be written is an error with a nonzero exit, never a silent 0.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor::testing;

namespace {

CommandResult shell(const std::string& script, const std::vector<std::string>& args) {
  std::vector<std::string> argv{"/bin/sh", "-c", script, CONVEYOR_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandOptions options;
  options.cwd = CONVEYOR_SOURCE_DIR;
  options.timeout = std::chrono::seconds(120);
  return run_command(argv, options);
}

}  // namespace

TEST_CASE("a run started with stdout and stderr closed trains and writes clean files") {
  TempDir dir;
  const std::string out = dir / "run";
  const auto r = shell("exec \"$0\" \"$@\" >&- 2>&-",
                       {"train", "configs/tiny.yaml", "--set", "train.steps=3", "--set", "train.eval_every=2",
                        "--out", out});
  CHECK(r.exit_code == 0);
  CHECK(r.out.empty());
  CHECK(fs::file_size(fs::path(out) / "weights.safetensors") > 0);
  std::istringstream lines(read_text(fs::path(out) / "metrics.jsonl"));
  int rows = 0;
  for (std::string line; std::getline(lines, line); ++rows) {
    CAPTURE(line);
    CHECK(nlohmann::json::accept(line));
  }
  CHECK(rows >= 3);
}

TEST_CASE("a log reader that goes away does not end the run") {
  TempDir dir;
  const std::string out = dir / "run", rc = dir / "rc";
  // stderr into `head -c 10`, which exits after the first line: every later log line
  // meets a closed pipe (SIGPIPE killed the run silently at its next line).
  const auto r = shell("rc=$1; shift; (\"$0\" \"$@\" 2>&1; echo $? > \"$rc\") | head -c 10 > /dev/null; sleep 0",
                       {rc, "train", "configs/tiny.yaml", "--set", "train.steps=6", "--set", "checkpoint.every=2",
                        "--out", out});
  CHECK(r.exit_code == 0);
  CHECK(read_text(rc) == "0\n");
  CHECK(fs::file_size(fs::path(out) / "weights.safetensors") > 0);
}

TEST_CASE("output that cannot be written is an error, not exit 0") {
  SUBCASE("JSON to a full disk") {
    const auto r = shell("exec \"$0\" \"$@\" > /dev/full",
                         {"sched", "--schedule", "1f1b", "--stages", "4", "--micro-batches", "8", "--format", "json"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("error: writing to standard output failed: No space left on device") != std::string::npos);
  }
  SUBCASE("--version to a full disk") {
    const auto r = shell("exec \"$0\" \"$@\" > /dev/full", {"--version"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("error: writing to standard output failed") != std::string::npos);
  }
}
