// exit:node=R:step=N[:when=start|checkpoint]: the process of node R dies as step N starts,
// or as it starts writing its own shards of the checkpoint after step N; on its first
// attempt only (a supervised restart does not die again).
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "actors/fault/fault_spec.hpp"
#include "tests/actors/fault/fault_spec_errors.hpp"

using namespace conveyor;

using testing::parse_error;

TEST_CASE("an exit fault fires at its step's start or in its checkpoint's shard write, on node R's first attempt") {
  const auto at_start = parse_fault_spec("exit:node=1:step=4:when=start");
  const auto in_write = parse_fault_spec("exit:node=1:step=10:when=checkpoint");
  CHECK_FALSE(at_start.in_checkpoint);
  CHECK(in_write.in_checkpoint);
  CHECK(in_write.node == 1);
  CHECK(*in_write.step == 10);
  CHECK_FALSE(parse_fault_spec("exit:node=1:step=4").in_checkpoint);

  ScriptedFaults faults({at_start, in_write});
  faults.set_process(1, /*first_attempt=*/true);
  CHECK(faults.exit_process(4));
  CHECK_FALSE(faults.exit_in_shard_write(4));
  CHECK_FALSE(faults.exit_process(10));  // the checkpoint's exit is not a step start's
  CHECK(faults.exit_in_shard_write(10));
  faults.set_process(0, true);
  CHECK_FALSE(faults.exit_in_shard_write(10));
  faults.set_process(1, /*first_attempt=*/false);
  CHECK_FALSE(faults.exit_process(4));
  CHECK_FALSE(faults.exit_in_shard_write(10));
}

TEST_CASE("an exit fault's when must be start or checkpoint, and only exit takes checkpoint") {
  CHECK(parse_error("exit:node=1:step=4:when=later").find("when=later is not start or checkpoint") !=
        std::string::npos);
  CHECK(parse_error("crash:stage=1:step=4:when=checkpoint").find("is not start or optimizer") != std::string::npos);
  CHECK(parse_error("exit:node=1:step=4:when=start:when=checkpoint").find("given twice") != std::string::npos);
}
