// fault.inject slow-checkpoint:step=N:ms=D (the entry's parsing is tested with the other
// fault entries, tests/actors/fault/corrupt_checkpoint_spec_test.cpp): the checkpoint of
// step N stalls with its shards on disk and no manifest, so whatever happens meanwhile
// meets a half-written checkpoint that no resume takes; then it completes, unchanged.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "actors/checkpoint/background_writer.hpp"
#include "actors/checkpoint/layout.hpp"
#include "actors/checkpoint/reader.hpp"
#include "actors/checkpoint/resume.hpp"
#include "actors/checkpoint/stalling_filesystem.hpp"
#include "tests/actors/checkpoint/checkpoint_test_support.hpp"

using namespace conveyor;
using namespace conveyor::checkpoint;
using namespace conveyor::testing;
using std::chrono::milliseconds;

TEST_CASE("the temporary file of a checkpoint's manifest or shard is found by its step folder") {
  CHECK(temp_file_step("c/step-000004/.manifest.json.tmp-1-1", kManifestFile) == 4);
  CHECK(temp_file_step("step-000012/.stage-0.safetensors.tmp-9-3", shard_file_name(0)) == 12);
  CHECK_FALSE(temp_file_step("c/step-000004/manifest.json", kManifestFile));
  CHECK_FALSE(temp_file_step("c/step-000004/.stage-1.safetensors.tmp-1-1", shard_file_name(0)));
  CHECK_FALSE(temp_file_step("c/other/.manifest.json.tmp-1-1", kManifestFile));
  CHECK_FALSE(temp_file_step(".manifest.json.tmp-1-1", kManifestFile));
}

TEST_CASE("a stalled checkpoint is half written for the stall, taken by no resume, then complete and intact") {
  ScratchDir dir("stalling");
  StallingFilesystem fs(posix_filesystem(), {{4, milliseconds(1500)}});
  CHECK(fs.stall_of(dir / "step-000004/.manifest.json.tmp-1-1") == milliseconds(1500));
  CHECK(fs.stall_of(dir / "step-000004/.stage-0.safetensors.tmp-1-1") == milliseconds(0));
  CHECK(fs.stall_of(dir / "step-000002/.manifest.json.tmp-1-1") == milliseconds(0));

  BackgroundWriter writer(fs, BackgroundWriterOptions{dir.path(), 3, 1});
  writer.submit(small_snapshot(2));
  writer.flush();
  const auto submitted = std::chrono::steady_clock::now();
  writer.submit(small_snapshot(4));
  // The shards land at once; the manifest waits out the stall.
  const auto shard = std::filesystem::path(dir / "step-000004") / shard_file_name(1);
  while (!std::filesystem::exists(shard) && std::chrono::steady_clock::now() - submitted < milliseconds(1000))
    std::this_thread::sleep_for(milliseconds(5));
  REQUIRE(std::filesystem::exists(shard));
  const auto folders = list_checkpoints(posix_filesystem(), dir.path());
  REQUIRE(folders.size() == 2);
  CHECK(folders[1].step == 4);
  CHECK_FALSE(folders[1].complete);
  CHECK(resolve_resume(posix_filesystem(), "latest", dir.path()).manifest.step == 2);

  writer.flush();
  CHECK(std::chrono::steady_clock::now() - submitted >= milliseconds(1500));
  CHECK(verify_checkpoint(posix_filesystem(), dir / "step-000004").shards.size() == 2);
  CHECK(resolve_resume(posix_filesystem(), "latest", dir.path()).manifest.step == 4);
}
