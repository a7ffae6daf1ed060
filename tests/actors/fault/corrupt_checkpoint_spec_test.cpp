// fault.inject corrupt-checkpoint:step=N and slow-checkpoint:step=N:ms=D parse beside drop:
// and delay: entries, and a bad one names the entry and what is wrong (what the entries do
// to a checkpoint: tests/actors/checkpoint/corrupting_filesystem_test.cpp,
// stalling_filesystem_test.cpp).
#include <doctest/doctest.h>

#include <chrono>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "actors/fault/fault_spec.hpp"
#include "tests/actors/fault/fault_spec_errors.hpp"

using namespace conveyor;
using testing::parse_error;

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
  CHECK(parse_error("corrupt-checkpoint") == "fault 'corrupt-checkpoint': step=N is missing");
  CHECK(parse_error("corrupt-checkpoint:step=x").find("step=x is not a whole number") != std::string::npos);
  CHECK(parse_error("corrupt-checkpoint:step=0").find("step=0 names no checkpoint") != std::string::npos);
  CHECK(parse_error("corrupt-checkpoint:step=2:stage=1").find("unknown field 'stage'") != std::string::npos);
  CHECK(parse_error("corrupted:step=2").find("(drop, delay, corrupt-checkpoint, nan, crash, hang, slow, exit, "
                                        "slow-checkpoint)") != std::string::npos);
}

TEST_CASE("slow-checkpoint:step=N:ms=D names a checkpoint and its stall, and a bad one says what is wrong") {
  const FaultSpec c = parse_fault_spec("slow-checkpoint:step=8:ms=1500");
  CHECK(c.kind == FaultSpec::Kind::slow_checkpoint);
  REQUIRE(c.step);
  CHECK(*c.step == 8);
  CHECK(c.delay == std::chrono::milliseconds(1500));
  const std::vector<FaultSpec> specs = {parse_fault_spec("slow-checkpoint:step=8:ms=10"),
                                        parse_fault_spec("corrupt-checkpoint:step=8"),
                                        parse_fault_spec("slow-checkpoint:step=8:ms=30"),
                                        parse_fault_spec("slow-checkpoint:step=4:ms=5")};
  const std::map<std::int64_t, std::chrono::milliseconds> want{{4, std::chrono::milliseconds(5)},
                                                               {8, std::chrono::milliseconds(30)}};
  CHECK(checkpoint_stalls(specs) == want);
  CHECK(corrupt_checkpoint_steps(specs) == std::vector<std::int64_t>{8});
  CHECK(parse_error("slow-checkpoint:step=8") == "fault 'slow-checkpoint:step=8': ms=D is missing");
  CHECK(parse_error("slow-checkpoint:ms=8") == "fault 'slow-checkpoint:ms=8': step=N is missing");
  CHECK(parse_error("slow-checkpoint:step=0:ms=8").find("step=0 names no checkpoint") != std::string::npos);
  CHECK(parse_error("slow-checkpoint:step=2:ms=8:stage=1").find("unknown field 'stage'") != std::string::npos);
}
