// `conveyor train --resume` with a checkpoint whose manifest records another partition
// than its shards were cut by: the checkpoint fails verification like a corrupt shard
// (the resume falls back to the one before, naming the manifest, the stage and the
// tensor), and alone it is refused with exit 2 before the run folder exists.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor::testing;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The small job for 12 steps on 4 stages (1 block each), with the extra arguments.
std::vector<std::string> job(const std::string& data, const fs::path& out, std::vector<std::string> extra) {
  std::vector<std::string> args{"train", source_path("configs/tiny.yaml")};
  for (const auto& a : small_job(data)) args.push_back(a);
  for (const auto& a : {"--set", "train.steps=12", "--set", "pipeline.stages=4", "--out"}) args.push_back(a);
  args.push_back(out.string());
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

void set_partition(const fs::path& manifest, const nlohmann::json& partition) {
  auto m = nlohmann::json::parse(read_text(manifest));
  REQUIRE(m.at("partition") == nlohmann::json({1, 1, 1, 1}));
  m["partition"] = partition;
  std::ofstream(manifest, std::ios::trunc) << m.dump(2) << "\n";
}

}  // namespace

TEST_CASE("--resume falls back past a checkpoint whose manifest partition disagrees with its shards, and refuses it alone") {
  TempDir dir;
  const std::string data = copy_english_text(dir);
  const fs::path run = dir.path() / "run";
  REQUIRE(run_conveyor(job(data, run, {"--set", "checkpoint.every=4"})).exit_code == 0);
  const fs::path step8 = run / "checkpoints/step-000008";
  set_partition(step8 / "manifest.json", {2, 1, 0.5, 0.5});  // blocks 0-1 on stage 0: stage 1 holds block 1

  const fs::path resumed = dir.path() / "resumed";
  const auto r = run_conveyor(job(data, resumed, {"--resume", step8.string()}));
  CHECK(r.exit_code == 0);
  CHECK(contains(r.err, "resuming from " + (run / "checkpoints/step-000004").string()));
  CHECK(contains(r.err, "skipped a newer checkpoint that failed verification: " + (step8 / "manifest.json").string() +
                            ": partition [2, 1, 0.5, 0.5] (blocks per model stage) does not match the shards: "
                            "stage 1's shard stage-1.safetensors holds blocks.1.ln1.weight"));
  CHECK(read_text(resumed / "weights.safetensors") == read_text(run / "weights.safetensors"));

  // The same checkpoint under another name has no older one beside it: refused, nothing written.
  const fs::path alone = dir.path() / "alone";
  fs::copy(step8, alone);
  const fs::path out = dir.path() / "refused";
  const auto refused = run_conveyor(job(data, out, {"--resume", alone.string()}));
  CHECK(refused.exit_code == 2);
  CHECK(split_lines(refused.err).size() == 1);
  CHECK(contains(refused.err, "error: --resume: " + (alone / "manifest.json").string() + ": partition [2, 1, 0.5, 0.5]"));
  CHECK_FALSE(fs::exists(out));
}
