// fault.straggler_factor / fault.straggler_steps through the real `conveyor train`: a stage
// made slow on purpose (fault.inject slow:stage=S:ms=D) is reported as a straggler, once,
// in metrics.jsonl and on the progress display; a fault-free run reports none.
#include <doctest/doctest.h>

#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor::testing;

namespace {

// tiny.yaml on 4 stages, 8 steps, 4 micro-batches, evaluated only at the end, plus `sets`.
std::vector<std::string> job(const fs::path& out, std::vector<std::string> sets) {
  std::vector<std::string> args{"configs/tiny.yaml",       "--set", "pipeline.stages=4",
                                "--set", "train.steps=8",  "--set", "train.eval_every=0",
                                "--set", "pipeline.micro_batches=4"};
  for (const auto& s : sets) args.insert(args.end(), {"--set", s});
  args.insert(args.end(), {"--out", out.string()});
  return args;
}

std::vector<nlohmann::json> straggler_rows(const fs::path& run) {
  std::vector<nlohmann::json> rows;
  for (const auto& row : read_jsonl(run / "metrics.jsonl"))
    if (row.value("event", "") == "straggler") rows.push_back(row);
  return rows;
}

}  // namespace

TEST_CASE("a stage slowed by fault.inject slow is reported as a straggler once, and no other stage") {
  TempDir dir;
  // Slow from step 4 on: steps 0-2 set the baselines. Factor 4 and 100 ms per action: on a
  // loaded 2-core CI machine a step's busy times swing by 2x on their own (seen: step 3
  // counted as slow at factor 2 with 40 ms, so the report came at step 5).
  const auto r = train_ok(job(dir / "slow", {"fault.straggler_factor=4",
                                             "fault.inject=[slow:stage=2:ms=100:step=4,"
                                             "slow:stage=2:ms=100:step=5,slow:stage=2:ms=100:step=6,"
                                             "slow:stage=2:ms=100:step=7]"}));
  const auto rows = straggler_rows(dir.path() / "slow");
  REQUIRE(rows.size() == 1);  // one episode: it stays slow to the end
  const auto& row = rows.front();
  CHECK(row.at("stage") == 2);
  CHECK(row.at("steps") == 3);  // fault.straggler_steps' default
  CHECK(row.at("step") == 6);   // slow from step 4: the third slow step
  CHECK(row.at("ratio").get<double>() > 2.0);
  CHECK(row.at("busy_ms").get<double>() > row.at("peer_median_ms").get<double>() * 2);
  CHECK(row.at("ratio").get<double>() > 2.0 * row.at("baseline_ratio").get<double>());
  CHECK(r.err.find("stage 2 is a straggler: 3 steps at ") != std::string::npos);
}

TEST_CASE("a stage slow from the start is imbalance, not a straggler") {
  TempDir dir;
  // Factor 4, as the fault-free case below: on a loaded 2-core CI machine the other stages'
  // busy times swing by more than 2x from step to step (seen: a false report at 2).
  train_ok(job(dir / "always", {"fault.inject=[slow:stage=2:ms=40]", "fault.straggler_factor=4"}));
  CHECK(straggler_rows(dir.path() / "always").empty());
}

TEST_CASE("a fault-free run reports no straggler") {
  TempDir dir;
  // Factor 4: on a loaded 2-core CI machine (tests in parallel, 4 stage threads each) a
  // stage thread can lose its core for a whole step; the product's default 2 is for
  // machines that run one job. Seen at factor 3 with builds running beside the tests.
  const auto r = train_ok(job(dir / "clean", {"fault.straggler_factor=4"}));
  CHECK(straggler_rows(dir.path() / "clean").empty());
  CHECK(r.err.find("straggler") == std::string::npos);
}

TEST_CASE("fault.straggler_* settings are checked, and slow needs its ms") {
  const auto f = run_conveyor({"train", "configs/tiny.yaml", "--set", "fault.straggler_factor=1"});
  CHECK(f.exit_code == 2);
  CHECK(f.err.find("fault.straggler_factor") != std::string::npos);
  const auto s = run_conveyor({"train", "configs/tiny.yaml", "--set", "fault.straggler_steps=0"});
  CHECK(s.exit_code == 2);
  CHECK(s.err.find("fault.straggler_steps") != std::string::npos);
  const auto m = run_conveyor({"train", "configs/tiny.yaml", "--set", "fault.inject=[slow:stage=1]"});
  CHECK(m.exit_code == 2);
  CHECK(m.err.find("ms=D is missing") != std::string::npos);
}
