// One conveyor process at a time per run folder and per checkpoint folder: a second run
// into a folder in use, resuming it or sharing its checkpoint.dir, exits 2 naming the
// folder, and the first run ends as if alone.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

#include "apps/train/folder_lock.hpp"
#include "kernels/common/error.hpp"
#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor::testing;

TEST_CASE("a second run into a run folder or a checkpoint folder in use is refused naming it") {
  TempDir dir;
  const fs::path run = dir.path() / "run";
  const std::string shared = dir / "shared-checkpoints";
  const std::string log = dir / "first.txt";
  const pid_t first = start_conveyor({"train", "configs/tiny.yaml", "--set", "train.steps=2000", "--set",
                                      "checkpoint.every=1", "--set", "checkpoint.keep=100000", "--set",
                                      "checkpoint.dir=" + shared, "--out", run.string()},
                                     log);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (step_rows(run / "metrics.jsonl") < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));

  const auto resumed = run_conveyor({"train", "configs/tiny.yaml", "--set", "train.steps=2000", "--set",
                                     "checkpoint.dir=" + shared, "--out", run.string(), "--resume", "latest"});
  CHECK(resumed.exit_code == 2);
  // Its checkpoint.dir is the first one's too: locked first.
  CHECK(resumed.err.find("checkpoint.dir " + shared + ": in use by another conveyor process") != std::string::npos);

  // Into the folder in use itself, from one of its checkpoints.
  const fs::path step1 = fs::path(shared) / "step-000001";
  REQUIRE(fs::exists(step1 / "manifest.json"));
  const auto into = run_conveyor({"train", "configs/tiny.yaml", "--set", "train.steps=2000", "--out", run.string(),
                                  "--resume", step1.string()});
  CHECK(into.exit_code == 2);
  CHECK(into.err.find(": in use by another conveyor process") != std::string::npos);

  const auto sharing = run_conveyor({"train", "configs/tiny.yaml", "--set", "train.steps=3", "--set",
                                     "checkpoint.every=1", "--set", "checkpoint.dir=" + shared, "--out",
                                     dir / "other"});
  CHECK(sharing.exit_code == 2);
  CHECK(sharing.err.find("checkpoint.dir " + shared + ": in use by another conveyor process") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.path() / "other"));  // refused before its run folder exists

  REQUIRE(::kill(first, SIGTERM) == 0);
  int status = 0;
  REQUIRE(::waitpid(first, &status, 0) == first);
  INFO("first run: " << read_text(log));
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  // Once it ended, the folder is free: the resume goes ahead.
  const auto after = run_conveyor({"train", "configs/tiny.yaml", "--set", "train.steps=" +
                                   std::to_string(step_rows(run / "metrics.jsonl") + 1), "--set",
                                   "checkpoint.dir=" + shared, "--out", run.string(), "--resume", "latest"});
  CHECK(after.exit_code == 0);
}

TEST_CASE("a folder lock is exclusive until its holder lets go") {
  TempDir dir;
  const fs::path run = dir.path() / "run";
  fs::create_directories(run);
  {
    const conveyor::FolderLock held(run, "--out");
    // flock(2) locks belong to the open folder: a second one conflicts, in this process too.
    const std::string expected = "--out " + run.string() + ": in use by another conveyor process";
    CHECK_THROWS_WITH_AS(conveyor::FolderLock(run, "--out"), doctest::Contains(expected.c_str()),
                         conveyor::InputError);
  }
  CHECK_NOTHROW(conveyor::FolderLock(run, "--out"));
  CHECK_THROWS_WITH_AS(conveyor::FolderLock(dir.path() / "missing", "checkpoint.dir"),
                       doctest::Contains("cannot open the folder to lock it"), conveyor::InputError);
}

namespace {

// Ends a run started by start_conveyor with SIGTERM and checks it stopped cleanly.
void stop_run(pid_t pid, const std::string& log) {
  REQUIRE(::kill(pid, SIGTERM) == 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  INFO("run: " << read_text(log));
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

void wait_for_steps(const fs::path& run, std::size_t steps) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (step_rows(run / "metrics.jsonl") < steps && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(step_rows(run / "metrics.jsonl") >= steps);
}

}  // namespace

TEST_CASE("a run's own checkpoint folder is locked however another run names it, in either order") {
  TempDir dir;
  // A uses its default checkpoints/; B names it as its checkpoint.dir a moment later.
  const fs::path a = dir.path() / "a";
  const pid_t first = start_conveyor({"train", "configs/tiny.yaml", "--set", "train.steps=2000", "--out", a.string()},
                                     dir / "a.txt");
  wait_for_steps(a, 2);
  const auto b = run_conveyor({"train", "configs/tiny.yaml", "--set", "train.steps=3", "--set", "checkpoint.every=1",
                               "--set", "checkpoint.dir=" + (a / "checkpoints").string(), "--out", dir / "b"});
  CHECK(b.exit_code == 2);
  CHECK(b.err.find("checkpoint.dir " + (a / "checkpoints").string() + ": in use by another conveyor process") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(dir.path() / "b"));
  stop_run(first, dir / "a.txt");

  // The other order: B holds c/checkpoints as its checkpoint.dir, then C starts with --out c.
  const fs::path c = dir.path() / "c";
  const fs::path d = dir.path() / "d";
  const pid_t holder = start_conveyor({"train", "configs/tiny.yaml", "--set", "train.steps=2000", "--set",
                                       "checkpoint.dir=" + (c / "checkpoints").string(), "--out", d.string()},
                                      dir / "d.txt");
  wait_for_steps(d, 2);
  const auto own = run_conveyor({"train", "configs/tiny.yaml", "--set", "train.steps=3", "--out", c.string()});
  CHECK(own.exit_code == 2);
  CHECK(own.err.find("checkpoint folder " + (c / "checkpoints").string() + ": in use by another conveyor process") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(c / "metrics.jsonl"));
  stop_run(holder, dir / "d.txt");
}
