// fault.policy restart with data-parallel replicas (parallel.data: 2 replicas of a 2-stage
// pipeline, stage actors numbered replica-major: actor = replica·2 + stage, so crash:stage=3
// is replica 1's stage 1 and crash:stage=0 replica 0's stage 0). A stage that fails outside
// the optimizer step is respawned and copies the state of a healthy replica of its stage,
// with or without snapshots; one that fails inside it rolls everyone back to the snapshot.
// Either way the run ends with the weights file bitwise that of the run without the fault.
#include <doctest/doctest.h>

#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor::testing;

namespace {

// tiny.yaml, 2 replicas × 2 stages, 5 steps, plus `sets`.
std::vector<std::string> job(const fs::path& out, std::vector<std::string> sets) {
  std::vector<std::string> args{"configs/tiny.yaml",  "--set", "pipeline.stages=2",
                                "--set", "parallel.data=2", "--set", "train.steps=5",
                                "--set", "train.eval_every=0"};
  for (const auto& s : sets) args.insert(args.end(), {"--set", s});
  args.insert(args.end(), {"--out", out.string()});
  return args;
}

std::vector<nlohmann::json> recovery_rows(const fs::path& run) {
  std::vector<nlohmann::json> rows;
  for (auto& row : read_jsonl(run / "metrics.jsonl"))
    if (row.value("event", "") == "recovery") rows.push_back(row);
  return rows;
}

std::string clean_weights(const TempDir& dir) {
  train_ok(job(dir / "clean", {}));
  return read_text(dir.path() / "clean" / "weights.safetensors");
}

struct Case {
  const char* name;
  std::vector<std::string> sets;
  int stage;                  // the stage actor that fails
  const char* restored_from;  // the recovery row's
  const char* fault = "crash";
};

void check_recovers(const TempDir& dir, const std::string& clean, const Case& c) {
  CAPTURE(c.name);
  train_ok(job(dir / c.name, c.sets));
  CHECK(read_text(dir.path() / c.name / "weights.safetensors") == clean);
  const auto rows = recovery_rows(dir.path() / c.name);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].at("fault") == c.fault);
  CHECK(rows[0].at("stage") == c.stage);
  CHECK(rows[0].at("respawned") == std::vector<int>{c.stage});
  CHECK(rows[0].at("restored_from") == c.restored_from);
  CHECK(rows[0].at("recovery_ms").get<double>() < 1000.0);
  MESSAGE(std::string(c.name) << ": recovery_ms " << rows[0].at("recovery_ms").get<double>() << ", from "
                 << rows[0].at("restored_from").get<std::string>());
}

}  // namespace

TEST_CASE("with 2 replicas a stage that crashes before the optimizer step copies a healthy replica and ends bitwise identical") {
  TempDir dir;
  const auto clean = clean_weights(dir);
  check_recovers(dir, clean, {"replica1", {"fault.inject=[crash:stage=3:step=2]"}, 3, "replica 0"});
  check_recovers(dir, clean, {"replica0", {"fault.inject=[crash:stage=0:step=3]"}, 0, "replica 1"});
}

TEST_CASE("with 2 replicas and fault.snapshot_every 0 a crash outside the optimizer step still recovers from a replica") {
  TempDir dir;
  const auto clean = clean_weights(dir);
  check_recovers(dir, clean, {"nosnap1", {"fault.inject=[crash:stage=2:step=1]", "fault.snapshot_every=0"}, 2, "replica 0"});
  check_recovers(dir, clean, {"nosnap0", {"fault.inject=[crash:stage=1:step=4]", "fault.snapshot_every=0"}, 1, "replica 1"});
}

TEST_CASE("with 2 replicas a crash inside the optimizer step rolls every stage back to the snapshot, bitwise identical") {
  TempDir dir;
  const auto clean = clean_weights(dir);
  check_recovers(dir, clean, {"optimizer", {"fault.inject=[crash:stage=3:step=2:when=optimizer]"}, 3, "snapshot"});

  // Without snapshots nothing holds the step's start: the run stops saying why.
  auto args = job(dir / "nosnap", {"fault.inject=[crash:stage=3:step=2:when=optimizer]",
                                   "fault.snapshot_every=0"});
  args.insert(args.begin(), "train");
  const auto r = run_conveyor(args);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("stage 3 failed") != std::string::npos);
  CHECK(r.err.find("inside the optimizer step") != std::string::npos);
  CHECK(r.err.find("fault.snapshot_every is 0") != std::string::npos);
}

TEST_CASE("with 2 replicas fault.on_nan rollback replays the step from the state every stage kept") {
  TempDir dir;
  const auto clean = clean_weights(dir);
  train_ok(job(dir / "nan", {"fault.inject=[nan:stage=3:step=2]", "fault.on_nan=rollback",
                             "fault.snapshot_every=0"}));
  CHECK(read_text(dir.path() / "nan" / "weights.safetensors") == clean);
  const auto rows = recovery_rows(dir.path() / "nan");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].at("fault") == "nan");
  CHECK(rows[0].at("respawned").empty());
  CHECK(rows[0].at("restored_from") == "kept");
  CHECK(rows[0].at("restored_step") == 2);
}

TEST_CASE("with 2 replicas a hung stage is replaced and copies a healthy replica, bitwise identical") {
  TempDir dir;
  const auto clean = clean_weights(dir);
  // 3 s: far above any wait of this job on a loaded 2-core machine (injected_faults_test).
  check_recovers(dir, clean, {"hang", {"fault.inject=[hang:stage=2:step=2]", "watchdog.timeout_s=3",
                                       "fault.snapshot_every=0"}, 2, "replica 0", "hang"});
}

TEST_CASE("with 2 replicas a stage group that times out is recovered with every stage keeping its state, and the budget ends a repeat") {
  TempDir dir;
  // Stage actor 2 is 300 ms slower per action in step 2, every time: its replica's buckets
  // time out (transport.timeout_s 0.5), the replay times out again, fault.max_restarts 1
  // stops the run. Never a hang.
  auto args = job(dir / "slow", {"fault.inject=[slow:stage=2:ms=300:step=2]",
                                 "transport.timeout_s=0.5", "fault.max_restarts=1"});
  args.insert(args.begin(), "train");
  const auto r = run_conveyor(args);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("its replica group failed") != std::string::npos);
  CHECK(r.err.find("fault.max_restarts") != std::string::npos);
  const auto rows = recovery_rows(dir.path() / "slow");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].at("fault") == "collective");
  CHECK(rows[0].at("step") == 2);
  CHECK(rows[0].at("respawned").empty());
  CHECK(rows[0].at("restored_from") == "kept");
}
