// GPU stages checkpoint and resume: `conveyor train` on 2 GPUs with a checkpoint every 5
// steps, resumed from the step-5 checkpoint, ends with weights.safetensors bitwise equal to
// the uninterrupted run (deterministic mode), in both precision recipes. Needs two GPUs and
// the conveyor binary (gpu_process_support.hpp); elsewhere it says why it skipped.
#include <doctest/doctest.h>

#include "tests/apps/gpu/gpu_process_support.hpp"

namespace {

using namespace conveyor::testing;

std::vector<std::string> job(const fs::path& out, const std::string& master) {
  return {"train", "configs/tiny.yaml", "--set", "devices.kind=cuda", "--set", "devices.ids=[0,1]",
          "--set", "model.heads=1", "--set", "pipeline.stages=2", "--set", "train.steps=10",
          "--set", "train.eval_every=0", "--set", "runtime.deterministic=true", "--set",
          "checkpoint.every=5", "--set", "optim.master=" + master, "--out", out.string()};
}

}  // namespace

TEST_CASE("gpu: a run resumed from a GPU checkpoint ends bitwise identical to the uninterrupted one") {
  const fs::path bin = two_gpus_and_binary();
  if (bin.empty()) return;
  const fs::path dir = fs::temp_directory_path() / ("conveyor-gpu-ckpt-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const std::string master : {"fp32", "bf16"}) {
    CAPTURE(master);
    const fs::path full = dir / ("full-" + master), resumed = dir / ("resumed-" + master);
    const auto a = wait_all({start(bin, job(full, master), dir / "full.err")}, std::chrono::seconds(180));
    INFO("uninterrupted:\n" << read_file(dir / "full.err"));
    REQUIRE(a[0] == 0);
    auto args = job(resumed, master);
    args.insert(args.end(), {"--resume", (full / "checkpoints" / "step-000005").string()});
    const auto b = wait_all({start(bin, args, dir / "resumed.err")}, std::chrono::seconds(180));
    INFO("resumed:\n" << read_file(dir / "resumed.err"));
    REQUIRE(b[0] == 0);
    const std::string x = read_file(full / "weights.safetensors");
    REQUIRE(!x.empty());
    CHECK_MESSAGE(x == read_file(resumed / "weights.safetensors"),
                  "weights differ between the uninterrupted run and the one resumed at step 5");
  }
  fs::remove_all(dir);
}
