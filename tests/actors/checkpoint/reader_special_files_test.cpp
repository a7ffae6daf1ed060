// Verifying a checkpoint never waits on a file that does not end: a shard or manifest that
// is a FIFO or a device is "not a regular file", and a shard of the wrong size is refused
// from its size alone, before it is hashed.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "actors/checkpoint/checkpoint_writer.hpp"
#include "actors/checkpoint/reader.hpp"
#include "tests/actors/checkpoint/checkpoint_test_support.hpp"

using namespace conveyor;
using namespace conveyor::testing;
using conveyor::checkpoint::posix_filesystem;
namespace fs = std::filesystem;

namespace {

std::string verify_error(const std::string& step_dir) {
  try {
    checkpoint::verify_checkpoint(posix_filesystem(), step_dir);
  } catch (const checkpoint::CheckpointError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a shard or manifest that is a FIFO or a device is refused at once") {
  ScratchDir dir("special");
  const auto written = checkpoint::write_checkpoint(posix_filesystem(), dir.path(), small_snapshot(3, 2), 2);
  const std::string shard = written.path + "/stage-1.safetensors", manifest = written.path + "/manifest.json";
  CHECK(verify_error(written.path).empty());

  fs::rename(shard, shard + ".saved");
  REQUIRE(::mkfifo(shard.c_str(), 0644) == 0);  // no writer: opening it blocking never returns
  CHECK(verify_error(written.path).find("stage-1.safetensors: not a regular file") != std::string::npos);
  fs::remove(shard);
  fs::create_symlink("/dev/zero", shard);  // never ends
  CHECK(verify_error(written.path).find("stage-1.safetensors: not a regular file") != std::string::npos);
  fs::remove(shard);
  fs::create_symlink(shard + ".loop", shard);  // a loop of links is reported as one, not "missing"
  fs::create_symlink(shard, shard + ".loop");
  CHECK(verify_error(written.path).find("Too many levels of symbolic links") != std::string::npos);
  fs::remove(shard);
  fs::remove(shard + ".loop");
  fs::rename(shard + ".saved", shard);

  fs::rename(manifest, manifest + ".saved");
  REQUIRE(::mkfifo(manifest.c_str(), 0644) == 0);
  CHECK(verify_error(written.path).find("manifest.json: not a regular file") != std::string::npos);
  fs::remove(manifest);
  fs::rename(manifest + ".saved", manifest);
  CHECK(verify_error(written.path).empty());
}

TEST_CASE("a shard of another size than the manifest's is refused without reading it") {
  ScratchDir dir("size");
  const auto written = checkpoint::write_checkpoint(posix_filesystem(), dir.path(), small_snapshot(3, 2), 2);
  const std::string shard = written.path + "/stage-0.safetensors";
  fs::resize_file(shard, std::uintmax_t{200} << 30);  // 200 GiB, sparse: hashing it takes minutes
  const auto start = std::chrono::steady_clock::now();
  CHECK(verify_error(written.path).find("shard is 214748364800 bytes") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
}
