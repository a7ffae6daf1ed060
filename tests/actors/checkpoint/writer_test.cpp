#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "actors/checkpoint/checkpoint_writer.hpp"
#include "actors/checkpoint/layout.hpp"
#include "actors/checkpoint/reader.hpp"
#include "actors/checkpoint/resume.hpp"
#include "kernels/io/safetensors.hpp"
#include "tests/actors/checkpoint/checkpoint_test_support.hpp"

namespace conveyor::testing {
namespace {

namespace fs = std::filesystem;
using checkpoint::posix_filesystem;

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

std::vector<std::int64_t> complete_steps(const std::string& dir) {
  std::vector<std::int64_t> out;
  for (const auto& c : checkpoint::list_checkpoints(posix_filesystem(), dir))
    if (c.complete) out.push_back(c.step);
  return out;
}

TEST_CASE("checkpoint step folder names sort by step and parse back") {
  CHECK(checkpoint::step_dir_name(123) == "step-000123");
  CHECK(checkpoint::step_dir_name(1234567) == "step-1234567");
  CHECK(checkpoint::parse_step_dir_name("step-000123") == 123);
  CHECK_FALSE(checkpoint::parse_step_dir_name("step-"));
  CHECK_FALSE(checkpoint::parse_step_dir_name("step-12a"));
  CHECK_FALSE(checkpoint::parse_step_dir_name(".step-000123.tmp"));
}

TEST_CASE("a checkpoint round trip gives back every tensor bit for bit and the manifest") {
  ScratchDir dir("roundtrip");
  const auto snap = small_snapshot(7, 3);
  const auto result = checkpoint::write_checkpoint(posix_filesystem(), dir.path(), snap, 2);
  CHECK(result.path == dir / "step-000007");
  CHECK(fs::exists(dir / "step-000007/manifest.json"));

  const auto loaded = checkpoint::load_checkpoint(posix_filesystem(), result.path);
  CHECK(loaded.manifest.step == 7);
  CHECK(loaded.manifest.seed == 1234);
  CHECK(loaded.manifest.config == snap.manifest.config);
  REQUIRE(loaded.manifest.shards.size() == 3);
  std::size_t n = 0;
  for (const auto& shard : snap.shards)
    for (const auto& t : shard.tensors) {
      REQUIRE(loaded.tensors.count(t.name));
      CHECK(same_bytes(loaded.tensors.at(t.name), t.tensor));
      ++n;
    }
  CHECK(loaded.tensors.size() == n);

  // The shards are plain safetensors: the kernels' reader (and Python's) reads them.
  const auto direct = read_safetensors(dir / "step-000007/stage-1.safetensors");
  REQUIRE(direct.size() == snap.shards[1].tensors.size());
  for (std::size_t i = 0; i < direct.size(); ++i) {
    CHECK(direct[i].name == snap.shards[1].tensors[i].name);
    CHECK(same_bytes(direct[i].tensor, snap.shards[1].tensors[i].tensor));
  }
  // Nothing temporary is left behind.
  for (const auto& e : fs::directory_iterator(result.path)) CHECK(e.path().filename().string()[0] != '.');
}

TEST_CASE("only the newest keep complete checkpoints are retained") {
  ScratchDir dir("keep");
  for (std::int64_t step : {10, 20, 30, 40}) {
    const auto r = checkpoint::write_checkpoint(posix_filesystem(), dir.path(), small_snapshot(step), 2);
    CHECK(r.warnings.empty());
  }
  CHECK(complete_steps(dir.path()) == std::vector<std::int64_t>{30, 40});
  CHECK_FALSE(fs::exists(dir / "step-000010"));
  CHECK_FALSE(fs::exists(dir / "step-000020"));
  // A smaller keep later prunes further; the survivors still verify.
  checkpoint::write_checkpoint(posix_filesystem(), dir.path(), small_snapshot(50), 1);
  CHECK(complete_steps(dir.path()) == std::vector<std::int64_t>{50});
  CHECK(checkpoint::verify_checkpoint(posix_filesystem(), dir / "step-000050").step == 50);
  CHECK_THROWS_AS(checkpoint::write_checkpoint(posix_filesystem(), dir.path(), small_snapshot(60), 0),
                  std::invalid_argument);
}

TEST_CASE("a checkpoint step folder without a manifest is ignored, then removed by the next write") {
  ScratchDir dir("incomplete");
  checkpoint::write_checkpoint(posix_filesystem(), dir.path(), small_snapshot(10), 3);
  checkpoint::write_checkpoint(posix_filesystem(), dir.path(), small_snapshot(20), 3);
  fs::remove(dir / "step-000020/manifest.json");  // as if the write of step 20 had died

  const auto resume = checkpoint::resolve_resume(posix_filesystem(), "latest", dir.path());
  CHECK(resume.path == dir / "step-000010");
  CHECK(resume.description.find("ignored an incomplete checkpoint") != std::string::npos);
  CHECK_THROWS_WITH_AS(checkpoint::load_checkpoint(posix_filesystem(), dir / "step-000020"),
                       doctest::Contains("incomplete checkpoint: no manifest.json"), checkpoint::CheckpointError);

  checkpoint::write_checkpoint(posix_filesystem(), dir.path(), small_snapshot(30), 3);
  CHECK_FALSE(fs::exists(dir / "step-000020"));
  CHECK(complete_steps(dir.path()) == std::vector<std::int64_t>{10, 30});
}

// Flips one byte in the middle of `file`: its size stays, only its sha256 tells.
void flip_a_byte(const std::string& file) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  REQUIRE(f);
  const auto middle = static_cast<std::streamoff>(fs::file_size(file) / 2);
  f.seekg(middle);
  char c = 0;
  f.get(c);
  f.seekp(middle);
  f.put(static_cast<char>(c ^ 0x5a));
}

TEST_CASE("pruning keeps the newest checkpoints that verify: a damaged newer one never counts") {
  ScratchDir dir("prune_damaged");
  checkpoint::write_checkpoint(posix_filesystem(), dir.path(), small_snapshot(10), 2);
  checkpoint::write_checkpoint(posix_filesystem(), dir.path(), small_snapshot(20), 2);
  flip_a_byte(dir / "step-000020/stage-0.safetensors");  // same size: only its hash shows it
  const auto r30 = checkpoint::write_checkpoint(posix_filesystem(), dir.path(), small_snapshot(30), 2);
  // keep 2: step 30 and the intact step 10; the damaged step 20 is left (newer than a kept
  // one) with a warning naming it.
  CHECK(complete_steps(dir.path()) == std::vector<std::int64_t>{10, 20, 30});
  CHECK(checkpoint::verify_checkpoint(posix_filesystem(), dir / "step-000010").step == 10);
  REQUIRE(r30.warnings.size() == 1);
  CHECK(r30.warnings[0].find("step-000020 does not verify") != std::string::npos);
  // Two intact ones newer than it: it goes, with the oldest.
  const auto r40 = checkpoint::write_checkpoint(posix_filesystem(), dir.path(), small_snapshot(40), 2);
  CHECK(complete_steps(dir.path()) == std::vector<std::int64_t>{30, 40});
  CHECK(r40.warnings.empty());
}

TEST_CASE("pruning keeps the newest checkpoints that verify: one that cannot be read never counts") {
  ScratchDir dir("prune_unreadable");
  FaultFilesystem unreadable;
  checkpoint::write_checkpoint(unreadable, dir.path(), small_snapshot(10), 2);
  checkpoint::write_checkpoint(unreadable, dir.path(), small_snapshot(20), 2);
  checkpoint::write_checkpoint(unreadable, dir.path(), small_snapshot(30), 2);
  CHECK(complete_steps(dir.path()) == std::vector<std::int64_t>{20, 30});
  unreadable.fail_open_of = "step-000030/";  // as a folder without read permission
  // The writer's memory: step 30 was verified once; it must still be readable to count.
  checkpoint::VerifiedCheckpoints verified;
  const auto r40 = checkpoint::write_checkpoint(unreadable, dir.path(), small_snapshot(40), 2, &verified);
  CHECK(complete_steps(dir.path()) == std::vector<std::int64_t>{20, 30, 40});
  REQUIRE(r40.warnings.size() == 1);
  CHECK(r40.warnings[0].find("step-000030 does not verify") != std::string::npos);
  CHECK(checkpoint::verify_checkpoint(posix_filesystem(), dir / "step-000020").step == 20);
  // Readable again: it counts, and the oldest goes.
  unreadable.fail_open_of.clear();
  checkpoint::write_checkpoint(unreadable, dir.path(), small_snapshot(50), 2, &verified);
  CHECK(complete_steps(dir.path()) == std::vector<std::int64_t>{40, 50});
}

TEST_CASE("a writer's memory of verified checkpoints hashes each once and notices a change") {
  ScratchDir dir("verified_memory");
  checkpoint::VerifiedCheckpoints verified;
  checkpoint::write_checkpoint(posix_filesystem(), dir.path(), small_snapshot(10), 3, &verified);
  CHECK(verified.intact(posix_filesystem(), dir / "step-000010"));
  // A shard cut short after it was verified: the re-inspection sees the size.
  fs::resize_file(dir / "step-000010/stage-1.safetensors", 10);
  CHECK_FALSE(verified.intact(posix_filesystem(), dir / "step-000010"));
  CHECK_FALSE(verified.intact(posix_filesystem(), dir / "step-000099"));  // no such folder
}

TEST_CASE("writing a step that already has a checkpoint replaces it") {
  ScratchDir dir("rewrite");
  checkpoint::write_checkpoint(posix_filesystem(), dir.path(), small_snapshot(10), 3);
  auto again = small_snapshot(10);
  again.manifest.config = "rewritten";
  checkpoint::write_checkpoint(posix_filesystem(), dir.path(), again, 3);
  CHECK(checkpoint::verify_checkpoint(posix_filesystem(), dir / "step-000010").config == "rewritten");
}

}  // namespace
}  // namespace conveyor::testing
