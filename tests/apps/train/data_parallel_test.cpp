// `conveyor train` with parallel.data: 2 replicas of a 2-stage pipeline (4 stage actors
// in one process) train configs/tiny.yaml to the loss curve of one 2-stage pipeline with
// the same global batch, within 1e-6 relative per step (fp32), and plan.json lists every
// replica's stages.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor::testing;

namespace {

constexpr int kSteps = 20;

// configs/tiny.yaml on 2 stages for kSteps steps with `replicas` replicas; the step rows
// of its metrics.jsonl.
std::vector<nlohmann::json> train_tiny(const TempDir& dir, int replicas) {
  const std::string out = dir / ("r" + std::to_string(replicas));
  train_ok({"configs/tiny.yaml", "--out", out, "--set", "pipeline.stages=2", "--set",
            "train.steps=" + std::to_string(kSteps), "--set", "train.eval_every=10", "--set",
            "fault.policy=abort", "--set", "parallel.data=" + std::to_string(replicas)},
           300);
  std::vector<nlohmann::json> steps;
  for (auto& row : read_jsonl(fs::path(out) / "metrics.jsonl"))
    if (row.contains("step") && !row.contains("event")) steps.push_back(row);
  return steps;
}

}  // namespace

TEST_CASE("conveyor train with 2 replicas of 2 stages follows the loss curve of one replica within 1e-6") {
  TempDir dir;
  const auto one = train_tiny(dir, 1);
  const auto two = train_tiny(dir, 2);
  REQUIRE(one.size() == kSteps);
  REQUIRE(two.size() == kSteps);
  double worst = 0;
  for (int s = 0; s < kSteps; ++s) {
    CAPTURE(s);
    CHECK(two[s].at("step") == s);
    const double a = one[s].at("loss"), b = two[s].at("loss");
    const double rel = std::fabs(a - b) / std::fabs(a);
    worst = std::max(worst, rel);
    CHECK(rel <= 1e-6);
    CHECK(two[s].at("stage_busy_ms").size() == 4);  // every stage actor of both replicas
    // The step's gradient averaging, measured (one replica: no such fields).
    CHECK(two[s].at("allreduce_ms").get<double>() > 0.0);
    CHECK(two[s].at("allreduce_exposed_ms").get<double>() >= 0.0);
    CHECK_FALSE(one[s].contains("allreduce_ms"));
  }
  MESSAGE("tiny.yaml, 2 stages, " << kSteps << " steps: worst relative loss difference R=2 vs R=1: "
                                  << worst);

  const auto plan = nlohmann::json::parse(read_text(fs::path(dir / "r2") / "plan.json"));
  CHECK(plan.at("data_parallel") == 2);
  CHECK(plan.at("micro_batches") == 4);  // one replica's share of tiny.yaml's 8
  CHECK(plan.at("placement").size() == 2);
  REQUIRE(plan.at("replicas").size() == 2);
  for (int r = 0; r < 2; ++r) {
    const auto& replica = plan.at("replicas")[r];
    CHECK(replica.at("replica") == r);
    REQUIRE(replica.at("stages").size() == 2);
    for (int s = 0; s < 2; ++s) {
      const auto& stage = replica.at("stages")[s];
      CHECK(stage.at("stage") == 2 * r + s);
      CHECK(stage.at("pipeline_stage") == s);
      CHECK(stage.at("device") == "cpu");
      CHECK(stage.at("first_micro_batch") == 4 * r);
      CHECK(stage.at("micro_batches") == 4);
    }
  }
  const auto plan_one = nlohmann::json::parse(read_text(fs::path(dir / "r1") / "plan.json"));
  CHECK(plan_one.at("data_parallel") == 1);
  CHECK(plan_one.at("replicas").size() == 1);
}

TEST_CASE("a checkpoint of 2 replicas holds one copy of each stage, and one replica's checkpoint resumes into 2") {
  TempDir dir;
  const std::vector<std::string> job{"configs/tiny.yaml", "--set", "pipeline.stages=2",
                                     "--set", "train.steps=6", "--set", "train.eval_every=0",
                                     "--set", "checkpoint.every=3"};
  auto with = [&](std::vector<std::string> extra) {
    auto args = job;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  train_ok(with({"--out", dir / "one"}), 120);
  // From the in-memory snapshots (fault.policy restart, the default) and asked of the
  // stages (abort: no snapshots): replica 0's two stages either way, not four.
  for (const char* policy : {"restart", "abort"}) {
    CAPTURE(policy);
    const std::string out = dir / (std::string("two-") + policy);
    train_ok(with({"--out", out, "--set", "parallel.data=2", "--set",
                   std::string("fault.policy=") + policy}),
             120);
    const auto manifest = nlohmann::json::parse(
        read_text(fs::path(out) / "checkpoints" / "step-000006" / "manifest.json"));
    REQUIRE(manifest.at("shards").size() == 2);
    CHECK(manifest.at("shards")[0].at("stage") == 0);
    CHECK(manifest.at("shards")[1].at("stage") == 1);
  }

  train_ok(with({"--out", dir / "resumed", "--set", "parallel.data=2", "--resume",
                 (fs::path(dir / "one") / "checkpoints" / "step-000003").string()}),
           120);
  auto last_loss = [](const std::string& run) {
    double loss = 0;
    for (auto& row : read_jsonl(fs::path(run) / "metrics.jsonl"))
      if (row.contains("step") && !row.contains("event") && row.at("step") == 5) loss = row.at("loss");
    return loss;
  };
  const double one = last_loss(dir / "one"), resumed = last_loss(dir / "resumed");
  REQUIRE(one > 0);
  CHECK(std::fabs(resumed - one) / one <= 1e-6);
}
