// Injected faults through the real `conveyor train`. A crashed stage stops the run naming
// the stage and the step. fault.on_nan, with the NaN injected where a numerical blow-up
// would leave it (fault.inject nan:stage=S:step=K puts it into the first message
// stage S sends that step). abort stops naming the step; skip drops exactly that step's
// update: the skipped run's state after K + 1 steps is bitwise the fault-free run's after
// K, its checkpoints count the AdamW steps actually taken, and a resume continues it bit
// for bit.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor::testing;

namespace {

// tiny.yaml on 4 stages for 6 steps, a checkpoint after every step, plus `sets`.
std::vector<std::string> job(const fs::path& out, std::vector<std::string> sets) {
  std::vector<std::string> args{"configs/tiny.yaml", "--set", "pipeline.stages=4", "--set",
                                "train.steps=6", "--set", "train.eval_every=0", "--set",
                                "checkpoint.every=1", "--set", "checkpoint.keep=10"};
  for (const auto& s : sets) args.insert(args.end(), {"--set", s});
  args.insert(args.end(), {"--out", out.string()});
  return args;
}

fs::path checkpoint(const fs::path& run, int steps) {
  return run / "checkpoints" / fmt::format("step-{:06d}", steps);
}

}  // namespace

TEST_CASE("fault.on_nan abort stops at the non-finite step naming it, without weights") {
  TempDir dir;
  auto args = job(dir / "run", {"fault.inject=[nan:stage=1:step=3]"});
  args.insert(args.begin(), "train");
  const auto r = run_conveyor(args);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("error: step 3 (counted from 0; the progress line's step 4): the loss (nan) "
                   "or the gradient norm (nan) is not finite") !=
        std::string::npos);
  CHECK(r.err.find("fault.on_nan: abort") != std::string::npos);
  CHECK(r.err.find("parameter gradient(s), the deepest ") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.path() / "run" / "weights.safetensors"));
}

TEST_CASE("fault.on_nan skip drops exactly the non-finite step's update, whichever stage it came from") {
  TempDir dir;
  train_ok(job(dir / "clean", {}));
  train_ok(job(dir / "skip1", {"fault.inject=[nan:stage=1:step=3]", "fault.on_nan=skip"}));
  train_ok(job(dir / "skip3", {"fault.inject=[nan:stage=3:step=3]", "fault.on_nan=skip"}));

  // After 4 steps with step 3 skipped, every stage's weights and AdamW moments are the
  // fault-free run's after 3 steps, and the manifest counts 3 AdamW steps.
  for (int s = 0; s < 4; ++s) {
    const auto name = fmt::format("stage-{}.safetensors", s);
    CAPTURE(name);
    CHECK(read_text(checkpoint(dir.path() / "skip1", 4) / name) ==
          read_text(checkpoint(dir.path() / "clean", 3) / name));
  }
  const auto manifest = nlohmann::json::parse(read_text(checkpoint(dir.path() / "skip1", 4) / "manifest.json"));
  CHECK(manifest.at("step") == 4);
  CHECK(manifest.at("optimizer_steps") == 3);

  bool logged = false;
  for (const auto& row : read_jsonl(dir.path() / "skip1" / "metrics.jsonl"))
    if (row.value("event", "") == "nan") {
      CHECK(row.at("step") == 3);
      CHECK(row.at("action") == "skip");
      logged = true;
    }
  CHECK(logged);
  const auto skipped = read_text(dir.path() / "skip1" / "weights.safetensors");
  CHECK(skipped == read_text(dir.path() / "skip3" / "weights.safetensors"));
  CHECK(skipped != read_text(dir.path() / "clean" / "weights.safetensors"));

  // A resume from the skipped run's checkpoint after 4 steps continues it bit for bit
  // (it restores AdamW's step count 3, not 4).
  train_ok({"configs/tiny.yaml", "--set", "pipeline.stages=4", "--set", "train.steps=6", "--set",
            "train.eval_every=0", "--resume", checkpoint(dir.path() / "skip1", 4).string(),
            "--out", (dir.path() / "resumed").string()});
  CHECK(read_text(dir.path() / "resumed" / "weights.safetensors") == skipped);
}

TEST_CASE("fault.on_nan takes abort, skip or rollback, and a nan fault needs its step") {
  const auto r = run_conveyor({"train", "configs/tiny.yaml", "--set", "fault.on_nan=retry"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("fault.on_nan") != std::string::npos);
  CHECK(r.err.find("rollback") != std::string::npos);
  const auto n = run_conveyor({"train", "configs/tiny.yaml", "--set", "fault.inject=[nan:stage=1]"});
  CHECK(n.exit_code == 2);
  CHECK(n.err.find("step=N is missing") != std::string::npos);
}

TEST_CASE("fault.policy abort: an injected crash stops the run naming the stage and the step, without weights") {
  TempDir dir;
  auto args = job(dir / "run", {"fault.inject=[crash:stage=2:step=3]", "fault.policy=abort"});
  args.insert(args.begin(), "train");
  const auto r = run_conveyor(args);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("error: stage 2 failed: injected crash at the start of step 3") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(dir.path() / "run" / "weights.safetensors"));
  // The steps before it were trained and checkpointed.
  CHECK(fs::exists(checkpoint(dir.path() / "run", 3) / "manifest.json"));
}

// A stage stuck for good inside its compute (slow: 10 minutes in one action) never ends
// its thread; the other stages, stopped, wait for it to let go of their handles. The run
// still ends with the hang's exit code soon after the diagnosis, on detached and on
// scheduled stage threads, where it used to wait for the stuck action to return.
TEST_CASE("fault.policy abort: a stage stuck in its compute does not keep the process from exiting") {
  for (const std::string threads : {"detached", "scheduled"}) {
    CAPTURE(threads);
    TempDir dir;
    auto args = job(dir / "run", {"fault.inject=[slow:stage=1:ms=600000:step=2]", "fault.policy=abort",
                                  "watchdog.timeout_s=2", "runtime.stage_threads=" + threads});
    args.insert(args.begin(), "train");
    const auto r = run_conveyor(args, 45);  // the stuck action alone would take 600 s
    CHECK(r.exit_code == 3);
    CHECK(r.err.find("watchdog: stalled: stage 1 has been running 1F0 of step 2") != std::string::npos);
    CHECK(r.err.find("conveyor: a stage is still running 5 s after the run ended") != std::string::npos);
    CHECK(r.err.find("error: the hang watchdog stopped the run") != std::string::npos);
    CHECK(fs::exists(checkpoint(dir.path() / "run", 2) / "manifest.json"));
  }
}

namespace {

std::vector<nlohmann::json> recovery_rows(const fs::path& run) {
  std::vector<nlohmann::json> rows;
  std::istringstream lines(read_text(run / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    auto row = nlohmann::json::parse(line);
    if (row.value("event", "") == "recovery") rows.push_back(row);
  }
  return rows;
}

}  // namespace

TEST_CASE("fault.policy restart (the default): a crash, a hang, a lost message and a NaN rollback each end bitwise identical to the fault-free run") {
  TempDir dir;
  train_ok(job(dir / "clean", {}));
  const auto clean = read_text(dir.path() / "clean" / "weights.safetensors");
  struct Case {
    const char* name;
    std::vector<std::string> sets;
    const char* fault;
    int stage;
  };
  const std::vector<Case> cases = {
      {"crash", {"fault.inject=[crash:stage=2:step=3]"}, "crash", 2},
      // 3 s: far above any wait of this job, even on a loaded 2-core machine running other
      // tests (at 1 s one run in several saw a second, spurious verdict there).
      {"hang", {"fault.inject=[hang:stage=1:step=2]", "watchdog.timeout_s=3"}, "hang", 1},
      // A lost message is a hang too: the watchdog finds it, the step is replayed.
      {"drop", {"fault.inject=[drop:stage=2:step=3]", "watchdog.timeout_s=3"}, "hang", -1},
      {"nan", {"fault.inject=[nan:stage=3:step=4]", "fault.on_nan=rollback"}, "nan", -1},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    train_ok(job(dir / c.name, c.sets));
    CHECK(read_text(dir.path() / c.name / "weights.safetensors") == clean);
    const auto rows = recovery_rows(dir.path() / c.name);
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].at("fault") == c.fault);
    if (c.stage >= 0) CHECK(rows[0].at("stage") == c.stage);
    CHECK_FALSE(rows[0].at("stages").empty());
    CHECK(rows[0].at("recovery_ms").get<double>() < 1000.0);
  }
}

TEST_CASE("beyond fault.max_restarts the run writes a checkpoint of its newest snapshot and stops saying how to resume") {
  TempDir dir;
  auto args = job(dir / "run", {"fault.inject=[crash:stage=0:step=2,crash:stage=1:step=4]",
                                "fault.max_restarts=1", "checkpoint.every=0"});
  args.insert(args.begin(), "train");
  const auto r = run_conveyor(args);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("fault.max_restarts") != std::string::npos);
  CHECK(r.err.find("a checkpoint after step 4 was written") != std::string::npos);
  CHECK(r.err.find("--resume latest") != std::string::npos);
  CHECK(fs::exists(checkpoint(dir.path() / "run", 4) / "manifest.json"));
  CHECK(recovery_rows(dir.path() / "run").size() == 1);
}
