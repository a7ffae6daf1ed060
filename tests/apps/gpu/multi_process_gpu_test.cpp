// GPU stages in two `conveyor train` processes (one GPU each, NCCL between them) train the
// tiny config to weights.safetensors bitwise identical to one process driving both GPUs
// (cuda-peer), in deterministic mode. Needs two GPUs and the conveyor binary beside this
// test (or CONVEYOR_BIN); runs from the repository root, as the other GPU suites.
// Elsewhere it says "skipped: no GPU" (or what else is missing) and returns.
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;

int gpu_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

// CONVEYOR_BIN, else `conveyor` beside this test or one folder up (the build tree).
fs::path conveyor_binary() {
  if (const char* bin = std::getenv("CONVEYOR_BIN")) return bin;
  const fs::path here = fs::read_symlink("/proc/self/exe").parent_path();
  for (const fs::path& p : {here / "conveyor", here.parent_path() / "conveyor"})
    if (fs::exists(p)) return p;
  return {};
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Starts `args` with stderr to `err`; returns the pid.
pid_t start(const fs::path& bin, std::vector<std::string> args, const fs::path& err) {
  args.insert(args.begin(), bin.string());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  REQUIRE_MESSAGE(rc == 0, "cannot start " << bin);
  return pid;
}

// Waits for every pid until the deadline (then kills what is left); the exit codes.
std::vector<int> wait_all(const std::vector<pid_t>& pids, std::chrono::seconds limit) {
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

std::vector<std::string> job(const fs::path& out) {
  return {"train", "configs/tiny.yaml", "--set", "devices.kind=cuda", "--set", "devices.ids=[0,1]",
          "--set", "model.heads=1", "--set", "pipeline.stages=2", "--set", "train.steps=10",
          "--set", "train.eval_every=0", "--set", "runtime.deterministic=true", "--out", out.string()};
}

}  // namespace

TEST_CASE("gpu: 2 processes x 1 GPU over NCCL train to the weights of 1 process x 2 GPUs bit for bit") {
  const int gpus = gpu_count();
  if (gpus < 2) {
    MESSAGE((gpus == 0 ? "skipped: no GPU" : "skipped: needs 2 GPUs, found 1"));
    return;
  }
  const fs::path bin = conveyor_binary();
  if (bin.empty()) {
    MESSAGE("skipped: no conveyor binary beside the test (set CONVEYOR_BIN)");
    return;
  }
  const fs::path dir = fs::temp_directory_path() /
                       ("conveyor-multiproc-gpu-" + std::to_string(::getpid()));
  fs::create_directories(dir);

  const auto one = wait_all({start(bin, job(dir / "one"), dir / "one.err")}, std::chrono::seconds(180));
  INFO("one process:\n" << read_file(dir / "one.err"));
  REQUIRE(one[0] == 0);

  std::mt19937 rng(std::random_device{}());
  const std::string rdzv = "127.0.0.1:" + std::to_string(30000 + rng() % 20000);
  std::vector<pid_t> pids;
  for (int n = 0; n < 2; ++n) {
    auto args = job(dir / "two");
    args.insert(args.end(), {"--nnodes", "2", "--node-rank", std::to_string(n), "--rdzv", rdzv,
                             "--token", "multi-process-gpu-test"});
    pids.push_back(start(bin, args, dir / ("node" + std::to_string(n) + ".err")));
  }
  const auto codes = wait_all(pids, std::chrono::seconds(180));
  INFO("node 0:\n" << read_file(dir / "node0.err") << "\nnode 1:\n" << read_file(dir / "node1.err"));
  REQUIRE(codes[0] == 0);
  REQUIRE(codes[1] == 0);
  const std::string a = read_file(dir / "one" / "weights.safetensors");
  const std::string b = read_file(dir / "two" / "weights.safetensors");
  REQUIRE(!a.empty());
  CHECK_MESSAGE(a == b, "weights differ between 1 process x 2 GPUs and 2 processes x 1 GPU");
  fs::remove_all(dir);
}
