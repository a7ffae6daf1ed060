// GPU stages in two `conveyor train` processes (one GPU each, NCCL between them) train the
// tiny config to weights.safetensors bitwise identical to one process driving both GPUs
// (cuda-peer), in deterministic mode. Needs two GPUs and the conveyor binary beside this
// test (or CONVEYOR_BIN); runs from the repository root, as the other GPU suites.
// Elsewhere it says "skipped: no GPU" (or what else is missing) and returns.
#include <doctest/doctest.h>

#include <random>

#include "tests/apps/gpu/gpu_process_support.hpp"

namespace {

using namespace conveyor::testing;

std::vector<std::string> job(const fs::path& out) {
  return {"train", "configs/tiny.yaml", "--set", "devices.kind=cuda", "--set", "devices.ids=[0,1]",
          "--set", "model.heads=1", "--set", "pipeline.stages=2", "--set", "train.steps=10",
          "--set", "train.eval_every=0", "--set", "runtime.deterministic=true", "--out", out.string()};
}

}  // namespace

TEST_CASE("gpu: 2 processes x 1 GPU over NCCL train to the weights of 1 process x 2 GPUs bit for bit") {
  const fs::path bin = two_gpus_and_binary();
  if (bin.empty()) return;
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
