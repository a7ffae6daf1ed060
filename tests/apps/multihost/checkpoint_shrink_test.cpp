// Issue 44, item 6: a node lost while a checkpoint is being written. 3 processes of one CPU
// stage each write a checkpoint every 4 steps (node 0 writes them from its store: its own
// stage's snapshots and the other nodes' buddy copies). Two injected faults make it
// deterministic, so no seed: the checkpoint after step 8 stalls 3 s with its shards on disk
// and no manifest yet (fault.inject slow-checkpoint), and node 2's process is SIGKILLed as
// step 8 starts (fault.inject exit), i.e. while that checkpoint is being written, and
// nobody starts it again. What must hold: the job shrinks onto nodes 0 and 1 (2 s rejoin
// timeout, so the shrink happens while the write still stalls) and goes on; the checkpoint
// under way completes in the layout it was taken in, whole; the later ones are written in
// the shrunk layout, their manifests saying so; every folder verifies (none is left half
// written); the run ends with the fault-free weights bit for bit; and --resume from the
// newest, shrunk-layout checkpoint in one process with the configured 3 stages ends with
// them too.
#include <doctest/doctest.h>
#include <signal.h>

#include <string>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

constexpr int kSteps = 22;  // checkpoints after steps 4, 8, … 20: the newest leaves steps to resume
constexpr int kEvery = 4;
constexpr int kLostAt = 8;  // node 2 dies as step 8 starts, while checkpoint 8 is written

}  // namespace

TEST_CASE("node 2 lost for good while a checkpoint is being written: the job shrinks, that checkpoint completes whole, later ones verify in the shrunk layout, and both the run and a resume from its newest checkpoint end with the fault-free weights") {
  TempDir dir;
  const std::string& want = one_process_weights(dir, three_stage_job(kSteps));

  const std::string faults = "fault.inject=[exit:node=2:step=" + std::to_string(kLostAt) +
                             ",slow-checkpoint:step=" + std::to_string(kLostAt) + ":ms=3000]";
  auto nodes = job_on_nodes(3,
                            three_stage_job(kSteps, {"--set", "checkpoint.every=" + std::to_string(kEvery), "--set",
                                             "checkpoint.keep=10", "--set", "fault.rejoin_timeout_s=2", "--set",
                                             faults}),
                            dir.path() / "run", "checkpoint-shrink-test");
  const auto results = run_nodes(dir, nodes, 150);
  INFO("node 0:\n" << results[0].err);
  INFO("node 1:\n" << results[1].err);
  INFO("node 2:\n" << results[2].err);
  CHECK(results[2].exit_code == 128 + SIGKILL);
  REQUIRE(results[0].exit_code == 0);
  REQUIRE(results[1].exit_code == 0);

  const auto run = dir.path() / "run";
  const auto replans = event_rows(run, "replan");
  REQUIRE(replans.size() == 1);
  const auto& r = replans[0];
  CHECK(r["lost_node"] == 2);
  CHECK(r["to"]["stages"] == 2);
  CHECK(r["restored_from"] == "buddy copies");
  // Step 8's snapshots were all in node 0's store (the checkpoint's capture needs them).
  CHECK(r["steps_redone"] == 0);
  MESSAGE("replan with checkpoints on: " << r.dump());

  // Checkpoints 4 and 8 in the 3-stage layout (8 was taken before the loss and completed
  // after the shrink), 12 to 20 in the shrunk one; each manifest says its shards' layout.
  const auto checkpoints = verified_checkpoints(run);
  CHECK(checkpoints.size() == static_cast<std::size_t>(kSteps / kEvery));
  for (const auto& [step, m] : checkpoints) {
    INFO("checkpoint of step " << step);
    CHECK(m.shards.size() == static_cast<std::size_t>(m.stages));
    const auto& layout = step <= kLostAt ? r["from"] : r["to"];
    CHECK(m.stages == layout["stages"].get<int>());
    CHECK(m.partition_halves == partition_halves(layout["partition"]));
  }

  CHECK_MESSAGE(read_text(run / "weights.safetensors") == want, "weights differ from the run without the fault");
  const auto newest = run / "checkpoints" / conveyor::checkpoint::step_dir_name(20);
  CHECK_MESSAGE(resumed_in_one_process(dir, three_stage_job(kSteps), newest.string()) == want,
                "the resume from " << newest.string() << " ends with other weights");
}
