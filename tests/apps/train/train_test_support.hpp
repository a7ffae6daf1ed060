#pragma once
// Shared pieces of the end-to-end tests of `conveyor train`: a temporary folder per test,
// running the built binary (from the source dir, under a deadline), reading what a run
// wrote, and the small, fast job the tests train.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/temp_dir.hpp"
#include "tests/apps/support/run_command.hpp"
#include "kernels/common/spawn_process.hpp"

extern char** environ;

namespace conveyor::testing {

namespace fs = std::filesystem;

inline std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The lines of `text` without their '\n'; a last line without '\n' counts too.
inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// Every line of a .jsonl file, parsed (a line that is not JSON fails the test).
inline std::vector<nlohmann::json> read_jsonl(const fs::path& path) {
  std::vector<nlohmann::json> rows;
  for (const auto& line : split_lines(read_text(path))) {
    INFO(path.string() << " line: " << line);
    REQUIRE_NOTHROW(rows.push_back(nlohmann::json::parse(line)));
  }
  return rows;
}

inline std::string source_path(const std::string& relative) {
  return (fs::path(CONVEYOR_SOURCE_DIR) / relative).string();
}

/// Runs the built `conveyor` with `args` from the source dir (where the default config
/// and corpus are found), or from `cwd` when given. A run past `timeout_s` is killed and
/// fails the test.
inline CommandResult run_conveyor(const std::vector<std::string>& args, int timeout_s = 60,
                                  const std::string& cwd = CONVEYOR_SOURCE_DIR) {
  std::vector<std::string> argv{CONVEYOR_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandOptions options;
  options.timeout = std::chrono::seconds(timeout_s);
  options.cwd = cwd;
  CommandResult r = run_command(argv, options);
  std::string command = "conveyor";
  for (const auto& a : args) command += " " + a;
  INFO("command: " << command);
  INFO("stderr: " << r.err);
  REQUIRE_MESSAGE(!r.timed_out, "killed after " << timeout_s << " s");
  return r;
}

/// Runs `conveyor train args...` and requires it to succeed.
inline CommandResult train_ok(const std::vector<std::string>& args, int timeout_s = 60) {
  std::vector<std::string> full{"train"};
  full.insert(full.end(), args.begin(), args.end());
  CommandResult r = run_conveyor(full, timeout_s);
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

/// tiny.yaml for 4 steps on 2 stages without evaluation, with `sets` (KEY=VALUE) on top,
/// into dir / name; returns that run folder.
inline fs::path train_tiny_two_stages(const TempDir& dir, const std::string& name,
                                      const std::vector<std::string>& sets) {
  const fs::path out = dir / name;
  std::vector<std::string> args = {"configs/tiny.yaml", "--out",          out.string(),
                                   "--set",             "train.steps=4", "--set",
                                   "train.eval_every=0", "--set",        "pipeline.stages=2"};
  for (const auto& s : sets) args.insert(args.end(), {"--set", s});
  train_ok(args, 300);
  return out;
}

/// A small English text (the README, copied so that every run of a test reads the same
/// bytes even if the file is edited meanwhile) with enough tokens for both splits.
inline std::string copy_english_text(const TempDir& dir) {
  return dir.write("english.txt", read_text(source_path("README.md")));
}

/// --set overrides for a job that trains in well under a second: 4 layers of width 32,
/// 4 micro-batches of 4 sequences of 64 bytes, 6 steps.
inline std::vector<std::string> small_job(const std::string& data_path) {
  return {"--set", "data.path=" + data_path, "--set", "model.layers=4",
          "--set", "model.d_model=32",       "--set", "model.heads=2",
          "--set", "pipeline.micro_batches=4", "--set", "train.steps=6",
          "--set", "train.eval_every=0"};
}

/// Step rows (not events) in a run's metrics.jsonl so far; read as text, since the run
/// may be writing its last line.
inline std::size_t step_rows(const fs::path& metrics) {
  if (!fs::exists(metrics)) return 0;
  std::size_t n = 0;
  for (const auto& line : split_lines(read_text(metrics)))
    n += line.find("\"step\"") != std::string::npos && line.find("\"event\"") == std::string::npos;
  return n;
}

/// Starts `conveyor args...` without waiting, stdout to /dev/null and stderr to `log`;
/// returns its pid. `wrapper`: a command in front that execs it (e.g. nohup).
inline pid_t start_conveyor(const std::vector<std::string>& args, const std::string& log,
                            const std::string& out = "/dev/null",
                            const std::vector<std::string>& wrapper = {}) {
  std::vector<std::string> argv = wrapper;
  argv.push_back(CONVEYOR_BINARY);
  argv.insert(argv.end(), args.begin(), args.end());
  // SIGINT as a terminal's Ctrl-C sends it (SIGHUP as its hang-up), even where the test
  // runner ignores it.
  return spawn_process(
      {.argv = argv, .stdout_path = out, .stderr_path = log, .default_signals = true});
}

/// Waits (up to a minute) until the run started as `pid` logged `steps` step rows in
/// `metrics`, sends it `signal` and returns its wait status once it ended.
inline int terminate_after_steps(pid_t pid, const fs::path& metrics, std::size_t steps,
                                 int signal = SIGTERM) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (step_rows(metrics) < steps && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(::kill(pid, signal) == 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return status;
}

}  // namespace conveyor::testing
