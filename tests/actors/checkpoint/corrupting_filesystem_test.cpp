// fault.inject corrupt-checkpoint:step=N (the entry's parsing is tested with the other
// fault entries, tests/actors/fault/corrupt_checkpoint_spec_test.cpp): the checkpoint of
// step N is written with a shard whose bytes differ from its recorded
// sha256, so resume skips it for the previous one while other steps stay intact.
#include <doctest/doctest.h>

#include "actors/checkpoint/checkpoint_error.hpp"
#include "actors/checkpoint/checkpoint_writer.hpp"
#include "actors/checkpoint/corrupting_filesystem.hpp"
#include "actors/checkpoint/reader.hpp"
#include "actors/checkpoint/resume.hpp"
#include "tests/actors/checkpoint/checkpoint_test_support.hpp"

using namespace conveyor;
using namespace conveyor::checkpoint;
using namespace conveyor::testing;

TEST_CASE("the checkpoint of a corrupt-checkpoint step fails verification by sha256 and resume falls back") {
  ScratchDir dir("corrupting");
  CorruptingFilesystem fs(posix_filesystem(), {4});
  write_checkpoint(fs, dir.path(), small_snapshot(2), 3);
  const WriteResult bad = write_checkpoint(fs, dir.path(), small_snapshot(4), 3);
  CHECK(fs.corrupts(bad.path + "/.stage-0.safetensors.tmp-1-1"));
  CHECK_FALSE(fs.corrupts(bad.path + "/.stage-1.safetensors.tmp-1-1"));
  CHECK_FALSE(fs.corrupts(dir / "step-000002/.stage-0.safetensors.tmp-1-1"));
  CHECK_NOTHROW(verify_checkpoint(posix_filesystem(), dir / "step-000002"));
  CHECK_THROWS_WITH_AS(verify_checkpoint(posix_filesystem(), bad.path),
                       doctest::Contains("stage-0.safetensors: shard's sha256"), CheckpointError);
  const ResumePoint point = resolve_resume(posix_filesystem(), "latest", dir.path());
  CHECK(point.manifest.step == 2);
  CHECK(point.description.find("skipped a newer checkpoint that failed verification") != std::string::npos);
}
