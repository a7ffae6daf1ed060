// Folders the run cannot write to: a read-only --out or checkpoint.dir fails at start
// (exit 2, before any training), and a checkpoint that meets a full disk does not end the
// run (its later checkpoints are tried, its weights written, exit 1 at the end). Both need
// a mount (root); elsewhere they say they are skipped.
#include <doctest/doctest.h>

#include <cstdlib>

#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor::testing;

TEST_CASE("a read-only --out or checkpoint.dir fails at start, exit 2, before any training") {
  TempDir dir;
  const std::string ro = dir / "ro";
  fs::create_directories(ro);
  // A read-only bind mount: what root cannot write to either (permissions do not stop root).
  if (std::system(("mount --bind " + ro + " " + ro + " 2>/dev/null && mount -o remount,ro,bind " + ro +
                   " 2>/dev/null").c_str()) != 0) {
    std::system(("umount " + ro + " 2>/dev/null").c_str());
    MESSAGE("skipped: cannot make a read-only mount here (needs root)");
    return;
  }
  const auto out = run_conveyor({"train", "configs/tiny.yaml", "--set", "train.steps=3", "--out", ro});
  const auto ck = run_conveyor({"train", "configs/tiny.yaml", "--set", "train.steps=3", "--set",
                                "checkpoint.dir=" + ro, "--out", dir / "run"});
  std::system(("umount " + ro).c_str());
  CHECK(out.exit_code == 2);
  CHECK(out.err.find("--out " + ro + ": cannot write there: Read-only file system") != std::string::npos);
  CHECK(ck.exit_code == 2);
  CHECK(ck.err.find("checkpoint.dir " + ro + ": cannot write there: Read-only file system") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.path() / "run"));
}

TEST_CASE("a checkpoint that fails to write (a full disk) does not end the run: the weights are written, exit 1") {
  TempDir dir;
  const std::string small = dir / "small";
  fs::create_directories(small);
  // 4 MiB: one checkpoint of tiny.yaml (2.8 MB) fits, the second does not.
  if (std::system(("mount -t tmpfs -o size=4m tmpfs " + small + " 2>/dev/null").c_str()) != 0) {
    MESSAGE("skipped: cannot mount a small tmpfs here (needs root)");
    return;
  }
  const fs::path run = dir.path() / "run";
  const auto r = run_conveyor({"train", "configs/tiny.yaml", "--set", "train.steps=6", "--set", "checkpoint.every=2",
                               "--set", "checkpoint.dir=" + small + "/c", "--out", run.string()});
  const bool first_kept = fs::exists(fs::path(small) / "c/step-000002/manifest.json");
  std::system(("umount " + small).c_str());
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("training goes on after that failed checkpoint") != std::string::npos);
  CHECK(r.err.find("checkpoint write(s) of this run failed: step 4:") != std::string::npos);
  CHECK(r.err.find("No space left on device") != std::string::npos);
  CHECK(first_kept);
  CHECK(fs::file_size(run / "weights.safetensors") > 0);  // trained to the end all the same
  CHECK(step_rows(run / "metrics.jsonl") == 6);
}

TEST_CASE("a full disk: the last line names the weights and every failed checkpoint, no partial folder is left") {
  TempDir dir;
  const std::string small = dir / "small";
  fs::create_directories(small);
  // 3.5 MiB: the step-2 checkpoint (2.8 MB) fits; the step-4 one and the weights do not.
  if (std::system(("mount -t tmpfs -o size=3584k tmpfs " + small + " 2>/dev/null").c_str()) != 0) {
    MESSAGE("skipped: cannot mount a small tmpfs here (needs root)");
    return;
  }
  const fs::path run = fs::path(small) / "run";
  const auto r = run_conveyor({"train", "configs/tiny.yaml", "--set", "train.steps=4", "--set", "checkpoint.every=2",
                               "--out", run.string()});
  const bool partial_left = fs::exists(run / "checkpoints/step-000004");
  const bool first_kept = fs::exists(run / "checkpoints/step-000002/manifest.json");
  std::system(("umount " + small).c_str());
  INFO(r.err);
  CHECK(r.exit_code == 1);
  const auto lines = split_lines(r.err);
  REQUIRE_FALSE(lines.empty());
  CHECK(lines.back().find("weights.safetensors") != std::string::npos);
  CHECK(lines.back().find("checkpoint write(s) of this run failed: step 4:") != std::string::npos);
  CHECK_FALSE(partial_left);
  CHECK(first_kept);
}

TEST_CASE("a start that fails after the run folder was made leaves no folder behind") {
  TempDir dir;
  const std::string full = dir / "full";
  fs::create_directories(full);
  if (std::system(("mount -t tmpfs -o size=64k tmpfs " + full + " 2>/dev/null").c_str()) != 0) {
    MESSAGE("skipped: cannot mount a small tmpfs here (needs root)");
    return;
  }
  // Fill it: the run folder can still be made, config.yaml cannot be written.
  std::system(("dd if=/dev/zero of=" + full + "/filler bs=4k 2>/dev/null").c_str());
  const auto r = run_conveyor({"train", "configs/tiny.yaml", "--set", "train.steps=2", "--out", full + "/run"});
  const bool left = fs::exists(fs::path(full) / "run");
  std::system(("umount " + full).c_str());
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("config.yaml") != std::string::npos);
  CHECK_FALSE(left);
}

TEST_CASE("an --out that is a link looping on itself is refused naming --out") {
  TempDir dir;
  const fs::path loop = dir.path() / "loop";
  fs::create_symlink(loop, loop);
  const auto r = run_conveyor({"train", "configs/tiny.yaml", "--set", "train.steps=2", "--out", loop.string()});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "error: --out " + loop.string() + ": Too many levels of symbolic links\n");
}
