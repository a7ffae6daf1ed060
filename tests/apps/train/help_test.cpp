// `conveyor --help`, `--version` and `conveyor train --help` print on stdout and succeed;
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

TEST_CASE("conveyor --version prints the version and the build's backends on stdout and exits 0") {
  const CommandResult r = run_conveyor({"--version"}, 30);
  INFO("stdout: " << r.out << "stderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.rfind(std::string("conveyor ") + CONVEYOR_VERSION + "\n", 0) == 0);
  CHECK(contains(r.out, "CUDA backend: "));
  CHECK(contains(r.out, "CAF 0.17."));
  CHECK(contains(r.out, "CPU GEMMs: OpenBLAS "));
  CHECK(r.err.empty());
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

TEST_CASE("a mistyped command is named with the commands of its level, also below bench and trace") {
  for (const auto& [args, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"tarin"}, "unknown command 'tarin' (conveyor commands: train, bench, config, sched, trace, checkpoint, hf, watch, sample;"},
           {{"checkpoint", "verfy", "x"}, "unknown command 'verfy' (conveyor checkpoint commands: verify, export, diff;"},
           {{"bench", "foo"}, "unknown command 'foo' (conveyor bench commands: overhead, e2e, model, serve, kernels, p2p;"},
           {{"bench", "foo", "--help"}, "unknown command 'foo' (conveyor bench commands"},
           {{"trace", "expor", "x"}, "unknown command 'expor' (conveyor trace commands: export, summary, check, draw;"}}) {
    const CommandResult r = run_conveyor(args);
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("error: " + message) == 0);
    CHECK(r.out.empty());
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
