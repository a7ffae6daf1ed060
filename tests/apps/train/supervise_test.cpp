// `conveyor train --supervise`: a training process killed hard (fault.inject exit:, a
// SIGKILL) is started again from the newest checkpoint, or from scratch before the first
// one, and the run ends with weights.safetensors bitwise identical to a run never killed;
// bad input is not retried, and the restarts are bounded.
#include <doctest/doctest.h>

#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor::testing;

namespace {

// tiny.yaml on 4 stages for 8 steps, plus `sets`.
std::vector<std::string> job(const fs::path& out, std::vector<std::string> sets, bool supervise) {
  std::vector<std::string> args{"train", "configs/tiny.yaml", "--set", "pipeline.stages=4",
                                "--set", "train.steps=8", "--out", out.string()};
  for (const auto& s : sets) args.insert(args.end(), {"--set", s});
  if (supervise) args.push_back("--supervise");
  return args;
}

}  // namespace

TEST_CASE("--supervise restarts a killed run from its newest checkpoint, or from scratch before one, bitwise") {
  TempDir dir;
  auto clean = job(dir / "clean", {}, false);
  clean.erase(clean.begin());
  train_ok(clean);
  const std::string weights = read_text(dir.path() / "clean" / "weights.safetensors");

  const auto resumed = run_conveyor(
      job(dir / "resumed", {"checkpoint.every=2", "fault.inject=[exit:node=0:step=5]"}, true), 120);
  INFO(resumed.err);
  CHECK(resumed.exit_code == 0);
  CHECK(resumed.err.find("attempt 1 ended with signal 9") != std::string::npos);
  CHECK(resumed.err.find("starting attempt 2 of 4 from the newest checkpoint") != std::string::npos);
  CHECK(resumed.err.find("resuming from") != std::string::npos);
  CHECK(read_text(dir.path() / "resumed" / "weights.safetensors") == weights);

  const auto fresh = run_conveyor(job(dir / "fresh", {"fault.inject=[exit:node=0:step=1]"}, true), 120);
  INFO(fresh.err);
  CHECK(fresh.exit_code == 0);
  CHECK(fs::exists(dir.path() / "fresh.attempt-1" / "config.yaml"));  // the killed attempt, kept
  CHECK(read_text(dir.path() / "fresh" / "weights.safetensors") == weights);
}

TEST_CASE("--supervise does not retry bad input and gives up after fault.max_restarts") {
  TempDir dir;
  const auto bad = run_conveyor(job(dir / "bad", {"train.steps=0"}, true));
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("train.steps") != std::string::npos);
  CHECK(bad.err.find("attempt") == std::string::npos);

  const auto none = run_conveyor(
      job(dir / "none", {"fault.max_restarts=0", "fault.inject=[exit:node=0:step=1]"}, true));
  CHECK(none.exit_code == 1);
  CHECK(none.err.find("giving up after 0 restarts") != std::string::npos);
}

TEST_CASE("an exit fault names a node and a step") {
  const auto r = run_conveyor({"train", "--set", "fault.inject=[exit:step=2]"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("node=R is missing") != std::string::npos);
  // A node this launch does not have: the fault would never fire.
  TempDir dir;
  const auto absent = run_conveyor({"train", "configs/tiny.yaml", "--set", "fault.inject=[exit:node=1:step=2]",
                                    "--out", dir / "run"});
  CHECK(absent.exit_code == 2);
  CHECK(absent.err.find("fault.inject: entry 'exit:node=1:step=2': node 1 does not exist: this run has 1 "
                        "process (nnodes 1, node ranks from 0)") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.path() / "run"));
  // A move's exit in one process: there is no move.
  const auto no_move = run_conveyor({"train", "configs/tiny.yaml", "--set", "fault.inject=[exit:node=0:when=relayout]",
                                     "--out", dir / "run"});
  CHECK(no_move.exit_code == 2);
  CHECK(no_move.err.find("fault.inject: entry 'exit:node=0:when=relayout': a run in one process never moves onto "
                         "another layout") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.path() / "run"));
  // A field given twice: which one counts would be a guess.
  const auto twice = run_conveyor({"train", "--set", "fault.inject=[crash:stage=1:step=1:step=0]"});
  CHECK(twice.exit_code == 2);
  CHECK(twice.err.find("field 'step' is given twice") != std::string::npos);
}

TEST_CASE("SIGTERM to the supervisor reaches the training process: it checkpoints and all exit 0, no restart") {
  TempDir dir;
  const fs::path run = dir.path() / "run";
  const std::string log = dir / "stderr.txt";
  const pid_t pid = start_conveyor(job(run, {"train.steps=400"}, true), log);
  const int status = terminate_after_steps(pid, run / "metrics.jsonl", 3);
  const std::string err = read_text(log);
  INFO("stderr: " << err);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(err.find("SIGTERM: stopped after step") != std::string::npos);
  CHECK(err.find("starting attempt 2") == std::string::npos);
  // The resume command keeps the supervisor.
  CHECK(err.find("--out " + run.string() + " --resume latest --supervise") != std::string::npos);
  CHECK(fs::exists(run / "checkpoints"));
  CHECK_FALSE(fs::exists(run / "weights.safetensors"));
}
