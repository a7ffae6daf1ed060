// `conveyor train` with stages cut between a block's attention and MLP halves
// (pipeline.partition with .5 entries): the weights of a whole-block run bit for bit, for a
// schedule with fused backward (1F1B) and one with split backward and two chunks per rank
// (ZBV); plan.json and the checkpoint manifest name the half blocks, and such a checkpoint
// resumes into whole blocks.
#include <doctest/doctest.h>

#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor;
using namespace conveyor::testing;

TEST_CASE("stages cut between a block's halves train to the weights of whole blocks, bit for bit") {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> runs{
      {"1f1b", "[1.5, 2.5]"}, {"zbv", "[1, 0.5, 1.5, 1]"}};
  for (const auto& [schedule, partition] : runs) {
    CAPTURE(schedule);
    const auto whole = train_tiny_two_stages(dir, schedule + "-whole", {"pipeline.schedule=" + schedule});
    const std::string want = read_text(whole / "weights.safetensors");
    REQUIRE(!want.empty());
    const auto half = train_tiny_two_stages(dir, schedule + "-half",
                                 {"pipeline.schedule=" + schedule, "pipeline.partition=" + partition});
    CHECK(read_text(half / "weights.safetensors") == want);
    const auto plan = nlohmann::json::parse(read_text(half / "plan.json"));
    CHECK(plan.at("partition") == "explicit");
    CHECK(plan.at("blocks_per_stage") == nlohmann::json::parse(partition));
    // 1F1B [1.5, 2.5]: stage 0 ends after block 1's attention half, stage 1 starts at its MLP.
    if (schedule == "1f1b") {
      CHECK(plan.at("placement")[0].at("layers") ==
            nlohmann::json({"embedding", "block 0", "block 1 attention"}));
      CHECK(plan.at("placement")[1].at("layers") ==
            nlohmann::json({"block 1 mlp", "block 2", "block 3", "head"}));
    }
  }
}

TEST_CASE("a checkpoint of a half-block partition names it and resumes into whole blocks") {
  TempDir dir;
  const auto half = train_tiny_two_stages(dir, "half", {"pipeline.partition=[2.5, 1.5]", "checkpoint.every=2"});
  const fs::path checkpoint = half / "checkpoints" / "step-000004";
  const auto manifest = nlohmann::json::parse(read_text(checkpoint / "manifest.json"));
  CHECK(manifest.at("partition") == nlohmann::json({2.5, 1.5}));
  // Resumed at step 2 into the uniform [2, 2]: the same 4-step weights as the half run.
  const fs::path out = dir / "resumed";
  train_ok({"configs/tiny.yaml", "--out", out.string(), "--resume",
            (half / "checkpoints" / "step-000002").string(), "--set", "train.steps=4", "--set",
            "train.eval_every=0", "--set", "pipeline.stages=2"},
           300);
  CHECK(read_text(out / "weights.safetensors") == read_text(half / "weights.safetensors"));
}
