// The helper the end-to-end tests run commands with: separate stdout and stderr, the exit
// code, and a deadline that kills a child instead of hanging the suite.
#include <doctest/doctest.h>

#include <string>

#include "tests/apps/support/run_command.hpp"

using namespace conveyor::testing;

TEST_CASE("run_command captures stdout, stderr and the exit code separately") {
  const auto r = run_command({"/bin/sh", "-c", "echo out; echo err >&2; exit 7"});
  CHECK(r.exit_code == 7);
  CHECK(r.out == "out\n");
  CHECK(r.err == "err\n");
  CHECK_FALSE(r.timed_out);
}

TEST_CASE("run_command drains large output on both streams without deadlock") {
  // More than a pipe buffer (64 KiB) on each stream, interleaved.
  const auto r = run_command(
      {"/bin/sh", "-c", "i=0; while [ $i -lt 2000 ]; do echo " + std::string(100, 'o') +
                            "; echo " + std::string(100, 'e') + " >&2; i=$((i+1)); done"},
      {std::chrono::seconds(60), ""});
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 0);
  CHECK(r.out.size() == 2000 * 101);
  CHECK(r.err.size() == 2000 * 101);
}

TEST_CASE("run_command kills a child that outlives its deadline and says so") {
  // The child keeps its pipes open (sleep inherits them), so only the deadline ends it.
  const auto r = run_command({"/bin/sh", "-c", "echo started; exec sleep 30"},
                             {std::chrono::milliseconds(300), ""});
  CHECK(r.timed_out);
  CHECK(r.exit_code == 128 + SIGKILL);
  CHECK(r.out == "started\n");
  CHECK(r.seconds < 10);
}

TEST_CASE("run_command kills a child that closed its pipes but does not exit") {
  const auto r = run_command({"/bin/sh", "-c", "exec >&- 2>&-; exec sleep 30"},
                             {std::chrono::milliseconds(300), ""});
  CHECK(r.timed_out);
  CHECK(r.seconds < 10);
}

TEST_CASE("run_command runs the child in the given working directory") {
  const auto r = run_command({"/bin/sh", "-c", "pwd"}, {std::chrono::seconds(30), "/"});
  CHECK(r.exit_code == 0);
  CHECK(r.out == "/\n");
}

TEST_CASE("run_command reports a program that cannot be executed as exit code 127") {
  const auto r = run_command({"/no/such/program"});
  CHECK(r.exit_code == 127);
  CHECK_FALSE(r.err.empty());
}
