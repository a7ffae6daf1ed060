#pragma once
// Starting `conveyor` processes from GPU tests: the binary, spawning with stderr to a
// file, bounded waits. Header-only, for tests/apps/gpu/.
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include "tests/support/cuda_devices.hpp"
#include "kernels/common/spawn_process.hpp"
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace conveyor::testing {

namespace fs = std::filesystem;

inline int gpu_count() { return testing::cuda_device_count(); }

// CONVEYOR_BIN, else `conveyor` beside this test or one folder up (the build tree).
inline fs::path conveyor_binary() {
  if (const char* bin = std::getenv("CONVEYOR_BIN")) return bin;
  const fs::path here = fs::read_symlink("/proc/self/exe").parent_path();
  for (const fs::path& p : {here / "conveyor", here.parent_path() / "conveyor"})
    if (fs::exists(p)) return p;
  return {};
}

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Starts `args` with stderr to `err`; returns the pid.
inline pid_t start(const fs::path& bin, std::vector<std::string> args, const fs::path& err) {
  args.insert(args.begin(), bin.string());
  return spawn_process(
      {.argv = args, .stdin_path = "/dev/null", .stdout_path = "/dev/null", .stderr_path = err});
}

// Waits for every pid until the deadline (then kills what is left); the exit codes.
inline std::vector<int> wait_all(const std::vector<pid_t>& pids, std::chrono::seconds limit) {
  std::vector<int> codes(pids.size(), -1);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::size_t left = pids.size();
  while (left > 0 && std::chrono::steady_clock::now() < deadline) {
    for (std::size_t i = 0; i < pids.size(); ++i) {
      int status = 0;
      if (codes[i] == -1 && ::waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        --left;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (std::size_t i = 0; i < pids.size(); ++i)
    if (codes[i] == -1) {
      ::kill(pids[i], SIGKILL);
      ::waitpid(pids[i], nullptr, 0);
    }
  return codes;
}

/// The conveyor binary when two GPUs and the binary are there; else empty, after saying
/// why the test is skipped.
inline fs::path two_gpus_and_binary() {
  const int gpus = gpu_count();
  if (gpus < 2) {
    // A std::string: doctest prints a bare const char* (the ternary's type) as a pointer.
    MESSAGE(std::string(gpus == 0 ? "skipped: no GPU" : "skipped: needs 2 GPUs, found 1"));
    return {};
  }
  fs::path bin = conveyor_binary();
  if (bin.empty()) MESSAGE("skipped: no conveyor binary beside the test (set CONVEYOR_BIN)");
  return bin;
}

}  // namespace conveyor::testing
