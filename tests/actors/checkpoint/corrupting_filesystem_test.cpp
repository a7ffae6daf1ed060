// fault.inject corrupt-checkpoint:step=N: the entry parses (beside drop: and delay:), and
// the checkpoint of step N is written with a shard whose bytes differ from its recorded
// sha256, so resume skips it for the previous one while other steps stay intact.
#include <doctest/doctest.h>

#include "actors/checkpoint/checkpoint_error.hpp"
#include "actors/checkpoint/checkpoint_writer.hpp"
#include "actors/checkpoint/corrupting_filesystem.hpp"
#include "actors/checkpoint/reader.hpp"
#include "actors/checkpoint/resume.hpp"
#include "actors/trace/fault_spec.hpp"
#include "tests/actors/checkpoint/checkpoint_test_support.hpp"

using namespace conveyor;
using namespace conveyor::checkpoint;
using namespace conveyor::testing;

TEST_CASE("corrupt-checkpoint:step=N parses beside drop and delay entries") {
  const FaultSpec c = parse_fault_spec("corrupt-checkpoint:step=6");
  CHECK(c.kind == FaultSpec::Kind::corrupt_checkpoint);
  REQUIRE(c.step);
  CHECK(*c.step == 6);
  CHECK(parse_fault_spec("drop:stage=1:step=2").kind == FaultSpec::Kind::drop);
  CHECK(parse_fault_spec("delay:stage=0:ms=5").kind == FaultSpec::Kind::delay);
  const std::vector<FaultSpec> specs = {parse_fault_spec("corrupt-checkpoint:step=9"),
                                        parse_fault_spec("drop:stage=1:step=2"),
                                        parse_fault_spec("corrupt-checkpoint:step=3")};
  CHECK(corrupt_checkpoint_steps(specs) == std::vector<std::int64_t>{3, 9});
}

TEST_CASE("a bad corrupt-checkpoint entry names the entry and what is wrong") {
  auto message = [](const std::string& entry) {
    try {
      parse_fault_spec(entry);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("<accepted>");
  };
  CHECK(message("corrupt-checkpoint") == "fault 'corrupt-checkpoint': step=N is missing");
  CHECK(message("corrupt-checkpoint:step=x").find("step=x is not a whole number") != std::string::npos);
  CHECK(message("corrupt-checkpoint:step=0").find("step=0 names no checkpoint") != std::string::npos);
  CHECK(message("corrupt-checkpoint:step=2:stage=1").find("unknown field 'stage'") != std::string::npos);
  CHECK(message("corrupted:step=2").find("(drop, delay, corrupt-checkpoint, nan, crash, hang, slow, exit)") != std::string::npos);
}

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
