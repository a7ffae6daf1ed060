// exit:node=R:step=N[:when=start|checkpoint]: the process of node R dies as step N starts,
// or as it starts writing its own shards of the checkpoint after step N; exit:node=R:when=relayout:
// as its directory receives a move onto another layout (issue 44); on its first attempt
// only (a supervised restart does not die again).
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
  CHECK(at_start.exit_when == FaultSpec::ExitWhen::start);
  CHECK(in_write.exit_when == FaultSpec::ExitWhen::checkpoint);
  CHECK(in_write.node == 1);
  CHECK(*in_write.step == 10);
  CHECK(parse_fault_spec("exit:node=1:step=4").exit_when == FaultSpec::ExitWhen::start);

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
  CHECK(parse_error("exit:node=1:step=4:when=later").find("when=later is not start, checkpoint, relayout or restore") !=
        std::string::npos);
  CHECK(parse_error("crash:stage=1:step=4:when=checkpoint").find("is not start or optimizer") != std::string::npos);
  CHECK(parse_error("exit:node=1:step=4:when=start:when=checkpoint").find("given twice") != std::string::npos);
}

TEST_CASE("exit when=relayout and when=restore fire at their moment on node R, take no step, and no step start or shard write fires them") {
  const auto in_move = parse_fault_spec("exit:node=2:when=relayout");
  const auto in_restore = parse_fault_spec("exit:node=1:when=restore");
  CHECK(in_move.exit_when == FaultSpec::ExitWhen::relayout);
  CHECK(in_restore.exit_when == FaultSpec::ExitWhen::restore);
  CHECK_FALSE(in_move.step.has_value());
  CHECK(in_move.node == 2);

  ScriptedFaults faults({in_move, in_restore});
  faults.set_process(2, /*first_attempt=*/true);
  CHECK(faults.exit_in_relayout());
  CHECK_FALSE(faults.exit_in_restore());
  for (std::int64_t step = 0; step < 4; ++step) {
    CHECK_FALSE(faults.exit_process(step));
    CHECK_FALSE(faults.exit_in_shard_write(step));
  }
  // Each process counts its own moments: node 1's process, and node 2's started again.
  ScriptedFaults node1({in_move, in_restore});
  node1.set_process(1, true);
  CHECK_FALSE(node1.exit_in_relayout());
  CHECK(node1.exit_in_restore());
  ScriptedFaults restarted({in_move, in_restore});
  restarted.set_process(2, /*first_attempt=*/false);  // a restarted node 2 joins and moves
  CHECK_FALSE(restarted.exit_in_relayout());
  ScriptedFaults at_step({parse_fault_spec("exit:node=2:step=3")});
  at_step.set_process(2, true);
  CHECK_FALSE(at_step.exit_in_relayout());
  CHECK_FALSE(at_step.exit_in_restore());

  // nth=N: the Nth move (or restore) of the process, each counted as it comes.
  ScriptedFaults second_move({parse_fault_spec("exit:node=1:when=relayout:nth=2")});
  second_move.set_process(1, true);
  CHECK_FALSE(second_move.exit_in_relayout());
  CHECK(second_move.exit_in_relayout());
  CHECK_FALSE(second_move.exit_in_restore());
  CHECK(parse_fault_spec("exit:node=1:when=restore:nth=3").nth == 3);
  CHECK(parse_error("exit:node=1:when=relayout:nth=0").find("nth=0 counts from 1") != std::string::npos);
  CHECK(parse_error("exit:node=1:step=2:nth=2").find("nth=N goes with when=relayout or when=restore") !=
        std::string::npos);
  CHECK(parse_error("exit:node=2:step=3:when=relayout").find("when=relayout takes no step=N") != std::string::npos);
  CHECK(parse_error("exit:node=2:step=3:when=restore").find("when=restore takes no step=N") != std::string::npos);
  CHECK(parse_error("exit:node=2:when=start") == "fault 'exit:node=2:when=start': step=N is missing");
  CHECK(parse_error("exit:when=relayout") == "fault 'exit:when=relayout': node=R is missing");
}
