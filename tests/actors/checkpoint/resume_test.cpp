#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "actors/checkpoint/checkpoint_writer.hpp"
#include "actors/checkpoint/reader.hpp"
#include "actors/checkpoint/resume.hpp"
#include "kernels/common/error.hpp"
#include "tests/actors/checkpoint/checkpoint_test_support.hpp"

namespace conveyor::testing {
namespace {

namespace fs = std::filesystem;
using checkpoint::CheckpointError;
using checkpoint::posix_filesystem;

void write_steps(const std::string& dir, std::initializer_list<std::int64_t> steps) {
  for (auto s : steps) checkpoint::write_checkpoint(posix_filesystem(), dir, small_snapshot(s), 5);
}

// Flips one bit of the byte at `offset` (counted from the end when negative).
void flip_byte(const std::string& path, std::int64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  REQUIRE(f);
  f.seekg(0, std::ios::end);
  const std::int64_t size = f.tellg();
  const std::int64_t at = offset < 0 ? size + offset : offset;
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c ^= 0x10;
  f.seekp(at);
  f.write(&c, 1);
}

std::string verify_error(const std::string& step_dir) {
  try {
    checkpoint::verify_checkpoint(posix_filesystem(), step_dir);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("one corrupt shard byte is detected and resume falls back to the previous checkpoint") {
  ScratchDir dir("corrupt");
  write_steps(dir.path(), {10, 20});
  flip_byte(dir / "step-000020/stage-1.safetensors", -5);  // inside the last tensor's data

  const std::string error = verify_error(dir / "step-000020");
  CHECK(error.find(dir / "step-000020/stage-1.safetensors") != std::string::npos);
  CHECK(error.find("sha256") != std::string::npos);
  CHECK(error.find("(corrupt)") != std::string::npos);
  CHECK_THROWS_AS(checkpoint::load_checkpoint(posix_filesystem(), dir / "step-000020"), CheckpointError);

  const auto resume = checkpoint::resolve_resume(posix_filesystem(), "latest", dir.path());
  CHECK(resume.path == dir / "step-000010");
  CHECK(resume.manifest.step == 10);
  REQUIRE(resume.skipped.size() == 1);
  CHECK(resume.skipped[0].find("stage-1.safetensors") != std::string::npos);
  CHECK(resume.description.find("skipped a newer checkpoint that failed verification") != std::string::npos);
  CHECK(resume.description.find("step-000020/stage-1.safetensors") != std::string::npos);

  // Asking for the corrupt one by path falls back the same way, and says so.
  const auto explicit_resume = checkpoint::resolve_resume(posix_filesystem(), dir / "step-000020", "unused");
  CHECK(explicit_resume.path == dir / "step-000010");
  CHECK(explicit_resume.skipped.size() == 1);
}

TEST_CASE("shards are hashed side by side, and of several corrupt ones the first in shard order is named") {
  ScratchDir dir("corrupt_many");
  // 8 stages of 1 MiB each: more shards than this machine's cores, so threads take turns.
  checkpoint::write_checkpoint(posix_filesystem(), dir.path(), small_snapshot(10, 8, 4096), 1);
  CHECK(checkpoint::verify_checkpoint(posix_filesystem(), dir / "step-000010").shards.size() == 8);
  for (int run = 0; run < 5; ++run) {  // whichever thread finishes first
    for (int k : {6, 3, 7}) flip_byte(dir / ("step-000010/stage-" + std::to_string(k) + ".safetensors"), -9);
    const std::string error = verify_error(dir / "step-000010");
    CHECK(error.find("stage-3.safetensors: shard's sha256") != std::string::npos);
    for (int k : {6, 3, 7}) flip_byte(dir / ("step-000010/stage-" + std::to_string(k) + ".safetensors"), -9);
    CHECK(verify_error(dir / "step-000010").empty());  // flipped back: intact again
  }
  // A size is checked for every shard before any is hashed.
  flip_byte(dir / "step-000010/stage-1.safetensors", -9);
  fs::resize_file(dir / "step-000010/stage-5.safetensors", 100);
  CHECK(verify_error(dir / "step-000010").find("stage-5.safetensors: shard is 100 bytes") != std::string::npos);
}

TEST_CASE("a truncated checkpoint shard is detected by its size and skipped") {
  ScratchDir dir("truncated");
  write_steps(dir.path(), {10, 20});
  const std::string shard = dir / "step-000020/stage-0.safetensors";
  fs::resize_file(shard, fs::file_size(shard) - 100);
  const std::string error = verify_error(dir / "step-000020");
  CHECK(error.find(shard) != std::string::npos);
  CHECK(error.find("(truncated or overwritten)") != std::string::npos);
  CHECK(checkpoint::resolve_resume(posix_filesystem(), "latest", dir.path()).manifest.step == 10);

  fs::remove(dir / "step-000010/stage-1.safetensors");  // now the older one lacks a shard
  CHECK(verify_error(dir / "step-000010").find("shard listed in manifest.json is missing") != std::string::npos);
  const std::string expected = "no usable checkpoint in " + dir.path();
  CHECK_THROWS_WITH_AS(checkpoint::resolve_resume(posix_filesystem(), "latest", dir.path()),
                       doctest::Contains(expected.c_str()), InputError);
}

TEST_CASE("a corrupt checkpoint manifest is a failed verification, not a crash") {
  ScratchDir dir("bad_manifest");
  write_steps(dir.path(), {10, 20});
  std::ofstream(dir / "step-000020/manifest.json") << "{\"format_version\": 1";
  CHECK(verify_error(dir / "step-000020").find("manifest.json: invalid manifest: not valid JSON") != std::string::npos);
  CHECK(checkpoint::resolve_resume(posix_filesystem(), "latest", dir.path()).manifest.step == 10);
}

TEST_CASE("a checkpoint whose manifest names another step than its folder is skipped, naming both") {
  ScratchDir dir("renamed_step");
  write_steps(dir.path(), {10, 20});
  fs::rename(dir / "step-000020", dir / "step-000030");  // step 20's files, in step 30's place
  const auto r = checkpoint::resolve_resume(posix_filesystem(), "latest", dir.path());
  CHECK(r.manifest.step == 10);
  CHECK(r.description.find(dir / "step-000030" + ": its manifest.json says step 20, the folder's name step 30") !=
        std::string::npos);
}

TEST_CASE("--resume accepts a checkpoint folder, a run folder, a checkpoint.dir and latest") {
  ScratchDir run("resume_forms");
  const std::string ckpt = run / "checkpoints";
  write_steps(ckpt, {10, 20, 30});
  auto& pfs = posix_filesystem();
  CHECK(checkpoint::resolve_resume(pfs, "latest", ckpt).manifest.step == 30);
  CHECK(checkpoint::resolve_resume(pfs, run.path(), "unused").manifest.step == 30);
  CHECK(checkpoint::resolve_resume(pfs, run.path() + "/", "unused").manifest.step == 30);
  CHECK(checkpoint::resolve_resume(pfs, ckpt, "unused").manifest.step == 30);
  CHECK(checkpoint::resolve_resume(pfs, ckpt + "/step-000020", "unused").manifest.step == 20);
  const auto r = checkpoint::resolve_resume(pfs, ckpt + "/step-000020", "unused");
  CHECK(r.description.find("resuming from " + ckpt + "/step-000020 (step 20") == 0);

  const std::string no_folder = run / "nope" + ": no such folder";
  CHECK_THROWS_WITH_AS(checkpoint::resolve_resume(pfs, run / "nope", "unused"), doctest::Contains(no_folder.c_str()),
                       InputError);
  const std::string no_dir = "checkpoint.dir " + run / "nope" + " does not exist";
  CHECK_THROWS_WITH_AS(checkpoint::resolve_resume(pfs, "latest", run / "nope"), doctest::Contains(no_dir.c_str()),
                       InputError);
  fs::create_directories(run / "empty");
  CHECK_THROWS_WITH_AS(checkpoint::resolve_resume(pfs, run / "empty", "unused"),
                       doctest::Contains("not a checkpoint (no manifest.json)"), InputError);
}

}  // namespace
}  // namespace conveyor::testing
