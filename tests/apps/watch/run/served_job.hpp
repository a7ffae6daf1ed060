#pragma once
// A real `conveyor train --serve 127.0.0.1:0` in a child process, for the tests of the live
// server: the port read from the URL its log names, the run folder, and a stop by SIGTERM
// (a child still running when the test ends is killed, so a failed CHECK leaks nothing).
#include <doctest/doctest.h>

#include <regex>

#include "tests/apps/train/train_test_support.hpp"

namespace conveyor::testing {

/// The port in "conveyor train: serving DIR at http://127.0.0.1:PORT/", once `log` says
/// it; 0 if not within `timeout`.
inline std::uint16_t wait_for_logged_port(const fs::path& log, std::chrono::seconds timeout = std::chrono::seconds(30)) {
  const std::regex url("serving .* at http://127\\.0\\.0\\.1:([0-9]+)/");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::smatch m;
    const std::string text = fs::exists(log) ? read_text(log) : "";
    if (std::regex_search(text, m, url)) return static_cast<std::uint16_t>(std::stoi(m[1]));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}

class ServedJob {
 public:
  /// Trains configs/tiny.yaml into dir/run with `overrides` (KEY=VALUE), serving it on a
  /// free loopback port. REQUIRES: the test's own REQUIRE may stop it (the destructor cleans up).
  ServedJob(const fs::path& dir, const std::vector<std::string>& overrides)
      : run(dir / "run"), log(dir / "train.err") {
    std::vector<std::string> args{"train", "configs/tiny.yaml", "--out", run.string(), "--serve", "127.0.0.1:0"};
    for (const auto& o : overrides) {
      args.push_back("--set");
      args.push_back(o);
    }
    pid_ = start_conveyor(args, log.string());
    port = wait_for_logged_port(log);
    if (port == 0) FAIL_CHECK("no URL logged within 30 s: " << read_text(log));
  }
  ~ServedJob() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  ServedJob(const ServedJob&) = delete;
  ServedJob& operator=(const ServedJob&) = delete;

  /// Waits until metrics.jsonl has `n` step rows (at most `timeout`); whether it has.
  bool wait_for_steps(std::size_t n, std::chrono::seconds timeout = std::chrono::seconds(60)) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (step_rows(run / "metrics.jsonl") < n) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }
  /// SIGTERM (a stop with a checkpoint), then the wait status.
  int stop() {
    ::kill(pid_, SIGTERM);
    return wait();
  }
  /// The wait status once the run ended by itself.
  int wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

  fs::path run, log;
  std::uint16_t port = 0;

 private:
  pid_t pid_ = -1;
};

}  // namespace conveyor::testing
