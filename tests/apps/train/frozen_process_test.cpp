// A process that is stopped (SIGSTOP, a suspended machine) and continued is not hung:
// its watchdog sees its own tick come late, counts every deadline again from then, and
// the run goes on. Before, the watchdog blamed a message "sent but never arrived" and,
// with fault.policy abort, ended the run with exit 3.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor::testing;

TEST_CASE("a run stopped for longer than the watchdog's timeout goes on after SIGCONT, no hang diagnosed") {
  TempDir dir;
  const fs::path run = dir.path() / "run";
  const std::string log = dir / "log.txt";
  const pid_t pid = start_conveyor({"train", "configs/tiny.yaml", "--set", "train.steps=40", "--set",
                                    "train.eval_every=0", "--set", "watchdog.timeout_s=1.5", "--set",
                                    "fault.policy=abort", "--out", run.string()},
                                   log);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (step_rows(run / "metrics.jsonl") < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(::kill(pid, SIGSTOP) == 0);
  std::this_thread::sleep_for(std::chrono::seconds(4));  // well past the 1.5 s deadline
  REQUIRE(::kill(pid, SIGCONT) == 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  const std::string err = read_text(log);
  INFO(err);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(err.find("watchdog: this process did not run for") != std::string::npos);
  CHECK(err.find("wait-for graph") == std::string::npos);
  CHECK(step_rows(run / "metrics.jsonl") == 40);
}
