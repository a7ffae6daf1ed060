// fault.inject corrupt-checkpoint:step=N parses beside drop: and delay: entries, and a bad
// one names the entry and what is wrong (what the entry does to a checkpoint:
// tests/actors/checkpoint/corrupting_filesystem_test.cpp).
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "actors/fault/fault_spec.hpp"

using namespace conveyor;

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
