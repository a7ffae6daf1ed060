// A checkpoint whose shards hold the weights but no AdamW moments (an edited or exported
// one), while its manifest records optimizer steps, would restart the optimizer at t = 0
// and quietly not continue the run: --resume refuses it, naming what is missing.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "actors/checkpoint/filesystem.hpp"
#include "actors/checkpoint/sha256.hpp"
#include "kernels/io/safetensors.hpp"
#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

// Rewrites every shard of `step_dir` without its opt.* tensors, with a manifest that
// matches the new bytes (so only the missing state is wrong).
void strip_moments(const fs::path& step_dir) {
  const fs::path manifest_path = step_dir / "manifest.json";
  auto manifest = nlohmann::json::parse(read_text(manifest_path));
  for (auto& shard : manifest.at("shards")) {
    const std::string path = (step_dir / shard.at("file").get<std::string>()).string();
    std::vector<NamedTensor> kept;
    nlohmann::json names = nlohmann::json::array();
    for (auto& t : read_safetensors(path))
      if (!t.name.starts_with("opt.")) {
        names.push_back(t.name);
        kept.push_back(std::move(t));
      }
    fs::remove(path);
    write_safetensors(path, kept, {});
    const auto digest = checkpoint::sha256_of_file(checkpoint::posix_filesystem(), path);
    shard["bytes"] = digest.bytes;
    shard["sha256"] = digest.sha256;
    shard["tensors"] = names;
  }
  std::ofstream(manifest_path) << manifest.dump();
}

}  // namespace

TEST_CASE("--resume refuses a checkpoint without optimizer state when its manifest records optimizer steps") {
  TempDir dir;
  const std::string run = dir / "run";
  train_ok({"configs/tiny.yaml", "--set", "train.steps=2", "--set", "train.eval_every=0", "--set",
            "checkpoint.every=2", "--out", run});
  const fs::path step = fs::path(run) / "checkpoints" / "step-000002";
  strip_moments(step);
  const auto r = run_conveyor({"train", "configs/tiny.yaml", "--set", "train.steps=4", "--resume", step.string(),
                               "--out", dir / "resumed"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("the manifest records 2 optimizer steps but the shards hold no optimizer state "
                   "(opt.m.* and opt.v.* tensors): resuming would restart AdamW") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.path() / "resumed"));
}
