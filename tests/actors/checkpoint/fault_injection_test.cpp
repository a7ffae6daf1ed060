#include <doctest/doctest.h>

#include <filesystem>

#include "actors/checkpoint/checkpoint_writer.hpp"
#include "actors/checkpoint/layout.hpp"
#include "actors/checkpoint/reader.hpp"
#include "actors/checkpoint/resume.hpp"
#include "tests/actors/checkpoint/checkpoint_test_support.hpp"

namespace conveyor::testing {
namespace {

namespace fs = std::filesystem;
using checkpoint::CheckpointError;
using checkpoint::posix_filesystem;

// Writes step 10 cleanly, then step 20 through `faulty`; returns the error's text.
std::string fail_second_write(const ScratchDir& dir, FaultFilesystem& faulty) {
  checkpoint::write_checkpoint(posix_filesystem(), dir.path(), small_snapshot(10), 1);
  try {
    checkpoint::write_checkpoint(faulty, dir.path(), small_snapshot(20), 1);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  FAIL("the injected fault did not make the write fail");
  return "";
}

// What must hold after any failed write of step 20: step 10 is intact and is what a
// resume picks; step 20 has no manifest.
void check_previous_intact(const ScratchDir& dir) {
  CHECK_FALSE(fs::exists(dir / "step-000020/manifest.json"));
  const auto resume = checkpoint::resolve_resume(posix_filesystem(), "latest", dir.path());
  CHECK(resume.path == dir / "step-000010");
  const auto loaded = checkpoint::load_checkpoint(posix_filesystem(), resume.path);
  CHECK(loaded.manifest.step == 10);
  CHECK(loaded.tensors.size() == 8);
}

TEST_CASE("a failing shard write leaves the previous checkpoint intact and names the file") {
  ScratchDir dir("fail_write");
  FaultFilesystem faulty;
  faulty.fail_write_to = "stage-1.safetensors";
  const std::string error = fail_second_write(dir, faulty);
  CHECK(error.find("step-000020/.stage-1.safetensors.tmp-") != std::string::npos);
  CHECK(error.find("injected ENOSPC") != std::string::npos);
  CHECK(error.find("checkpoint of step 20 failed") != std::string::npos);
  check_previous_intact(dir);
  // The failed write's folder was removed, its temporary file with it.
  CHECK_FALSE(fs::exists(dir / "step-000020"));
}

TEST_CASE("a short write (a disk that fills up) fails the checkpoint, naming the file") {
  ScratchDir dir("short_write");
  FaultFilesystem faulty;
  faulty.short_write_to = "stage-0.safetensors";
  const std::string error = fail_second_write(dir, faulty);
  CHECK(error.find(".stage-0.safetensors.tmp-") != std::string::npos);
  CHECK(error.find("write accepted 0 bytes") != std::string::npos);
  check_previous_intact(dir);
}

TEST_CASE("a checkpoint write that reports bytes it did not keep is caught before the rename") {
  ScratchDir dir("lying_write");
  FaultFilesystem faulty;
  faulty.lying_write_to = "stage-1.safetensors";
  const std::string error = fail_second_write(dir, faulty);
  CHECK(error.find(".stage-1.safetensors.tmp-") != std::string::npos);
  CHECK(error.find("(short write)") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "step-000020/stage-1.safetensors"));
  check_previous_intact(dir);
}

TEST_CASE("failing renames and fsyncs leave the previous checkpoint intact and name the file") {
  struct Case {
    const char* what;
    std::string FaultFilesystem::*field;
    const char* pattern;
    const char* expected;
  };
  const Case cases[] = {
      {"shard rename", &FaultFilesystem::fail_rename_to, "stage-0.safetensors", "step-000020/stage-0.safetensors: rename"},
      {"manifest rename", &FaultFilesystem::fail_rename_to, "manifest.json", "step-000020/manifest.json: rename"},
      {"shard fsync", &FaultFilesystem::fail_sync_to, "stage-1.safetensors", ".stage-1.safetensors.tmp-"},
      {"manifest fsync", &FaultFilesystem::fail_sync_to, "manifest.json", ".manifest.json.tmp-"},
      {"folder fsync", &FaultFilesystem::fail_dir_sync_to, "step-000020", "step-000020: fsync of folder failed"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    ScratchDir dir("fail_rename_fsync");
    FaultFilesystem faulty;
    faulty.*(c.field) = c.pattern;
    const std::string error = fail_second_write(dir, faulty);
    CHECK(error.find(c.expected) != std::string::npos);
    CHECK(error.find("injected EIO") != std::string::npos);
    check_previous_intact(dir);
  }
}

TEST_CASE("a crash at any point of a checkpoint write leaves one complete, verifiable checkpoint as the newest") {
  // Crashes are simulated (every call after the k-th fails), so real fsyncs would only
  // cost time here; the other tests use them.
  FaultFilesystem setup;
  setup.skip_fsync = true;
  // Count the mutating calls of one clean write, then crash before each of them in turn.
  long total = 0;
  {
    ScratchDir dir("crash_count");
    checkpoint::write_checkpoint(setup, dir.path(), small_snapshot(10), 1);
    FaultFilesystem counting;
    counting.skip_fsync = true;
    checkpoint::write_checkpoint(counting, dir.path(), small_snapshot(20), 1);
    total = counting.ops();
  }
  REQUIRE(total > 10);
  int old_seen = 0, new_seen = 0;
  for (long k = 0; k <= total; ++k) {
    CAPTURE(k);
    ScratchDir dir("crash");
    checkpoint::write_checkpoint(setup, dir.path(), small_snapshot(10), 1);
    FaultFilesystem faulty;
    faulty.skip_fsync = true;
    faulty.crash_after_ops = k;
    bool failed = false;
    try {
      checkpoint::write_checkpoint(faulty, dir.path(), small_snapshot(20), 1);
    } catch (const CheckpointError& e) {
      failed = true;
      CHECK(std::string(e.what()).find("simulated crash") != std::string::npos);
    }
    // After the "restart": whatever resume picks verifies and loads, and it is step 20
    // exactly when step 20's manifest made it to disk.
    const auto resume = checkpoint::resolve_resume(posix_filesystem(), "latest", dir.path());
    const auto loaded = checkpoint::load_checkpoint(posix_filesystem(), resume.path);
    const bool new_complete = fs::exists(dir / "step-000020/manifest.json");
    if (k >= total) CHECK_FALSE(failed);
    // Reported success means complete (a crash while pruning only costs old folders).
    if (!failed) CHECK(new_complete);
    CHECK(loaded.manifest.step == (new_complete ? 20 : 10));
    (new_complete ? new_seen : old_seen)++;
    // A later clean write recovers fully from whatever the crash left.
    checkpoint::write_checkpoint(setup, dir.path(), small_snapshot(30), 1);
    CHECK(checkpoint::resolve_resume(posix_filesystem(), "latest", dir.path()).manifest.step == 30);
    CHECK(checkpoint::list_checkpoints(posix_filesystem(), dir.path()).size() == 1);
  }
  CHECK(old_seen > 0);
  CHECK(new_seen > 0);
}

}  // namespace
}  // namespace conveyor::testing
