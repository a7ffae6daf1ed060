// The pure parts of `conveyor train`'s checkpoints: when one is taken, what its manifest
// says about the run, and the resume command printed after SIGTERM.
#include <doctest/doctest.h>

#include "actors/plan/elastic_plan.hpp"
#include "apps/train/resume_hint.hpp"
#include "apps/train/train_checkpoints.hpp"
#include "tests/actors/support/tiny_job.hpp"

using namespace conveyor;

TEST_CASE("a checkpoint is taken every checkpoint.every steps, and a stop request takes one and stops") {
  auto d = checkpoint_decision(6, 3, 12, false);
  CHECK(d.snapshot);
  CHECK_FALSE(d.stop);
  d = checkpoint_decision(7, 3, 12, false);
  CHECK_FALSE(d.snapshot);
  d = checkpoint_decision(12, 3, 12, false);  // the last step too: a later run may go on from it
  CHECK(d.snapshot);
  d = checkpoint_decision(5, 0, 12, false);  // 0: off
  CHECK_FALSE(d.snapshot);
  d = checkpoint_decision(5, 0, 12, true);  // SIGTERM: even with checkpoint.every 0
  CHECK(d.snapshot);
  CHECK(d.stop);
  d = checkpoint_decision(12, 0, 12, true);  // after the last step the run just ends
  CHECK_FALSE(d.stop);
  CHECK_FALSE(d.snapshot);
}

TEST_CASE("across processes a stop waits for a boundary every node snapshotted, and a job that cannot write stops bare") {
  auto d = checkpoint_decision(7, 0, 40, true, /*stop_every=*/5);  // no snapshot of step 7 on node 0
  CHECK_FALSE(d.stop);
  CHECK_FALSE(d.snapshot);
  d = checkpoint_decision(10, 0, 40, true, 5);
  CHECK(d.stop);
  CHECK(d.snapshot);
  d = checkpoint_decision(10, 5, 40, false, 5);  // checkpoint.every alone is unchanged
  CHECK(d.snapshot);
  CHECK_FALSE(d.stop);
  d = checkpoint_decision(7, 0, 40, true, 1, /*writes=*/false);  // e.g. no snapshots: no state taken
  CHECK(d.stop);
  CHECK_FALSE(d.snapshot);
  d = checkpoint_decision(40, 0, 40, true, 1, false);
  CHECK_FALSE(d.stop);
}

TEST_CASE("the manifest of a run names its seed, schedule, stages, blocks per stage and config") {
  testing::TinyJobOptions o;
  o.stages = 2;
  o.layers = 5;
  const Job job = testing::tiny_job(o);
  const auto m = manifest_base(job.plan, "1f1b", "model:\n  layers: 5\n");
  CHECK(m.seed == job.plan.data.seed);
  CHECK(m.schedule == "1f1b");
  CHECK(m.stages == 2);
  CHECK(m.partition_halves == std::vector<std::int64_t>{6, 4});
  CHECK(m.config == "model:\n  layers: 5\n");
}

TEST_CASE("after a shrink and a grow the manifest says the layout that runs: its stages and blocks per stage") {
  testing::TinyJobOptions o;
  o.stages = 3;
  o.layers = 4;
  const Job job = testing::tiny_job(o);
  auto m = manifest_base(job.plan, "1f1b", "pipeline:\n  stages: 3\n");
  CHECK(m.stages == 3);
  CHECK(m.partition_halves == std::vector<std::int64_t>{4, 2, 2});
  // Node 2 lost for good: nodes 0 and 1 run 2 stages, the blocks cut uniformly again.
  const auto shrunk = choose_layout(job.plan, {0, 1, 2}, {0, 1});
  REQUIRE(shrunk.plan);
  set_manifest_layout(m, *shrunk.plan);
  CHECK(m.stages == 2);
  CHECK(m.partition_halves == std::vector<std::int64_t>{4, 4});
  CHECK(m.schedule == "1f1b");
  CHECK(m.seed == job.plan.data.seed);  // the run's own fields stay
  CHECK(m.config == "pipeline:\n  stages: 3\n");
  // Node 2 joins again: the configured layout, and its manifest, come back.
  const auto grown = choose_layout(job.plan, {0, 1, 2}, {0, 1, 2});
  REQUIRE(grown.plan);
  set_manifest_layout(m, *grown.plan);
  CHECK(m == manifest_base(job.plan, "1f1b", "pipeline:\n  stages: 3\n"));
}

TEST_CASE("the resume command repeats config, overrides and run folder, quoted for a shell") {
  CHECK(shell_quote("runs/x-1.yaml") == "runs/x-1.yaml");
  CHECK(shell_quote("a b") == "'a b'");
  CHECK(shell_quote("it's") == "'it'\\''s'");
  CHECK(shell_quote("") == "''");
  CHECK(resume_command("configs/tiny.yaml", {"train.steps=40", "fault.inject=[drop:stage=1:step=2]"},
                       "/tmp/run 1", {"--format", "json"}) ==
        "conveyor train configs/tiny.yaml --set train.steps=40 --set "
        "'fault.inject=[drop:stage=1:step=2]' --out '/tmp/run 1' --resume latest --format json");
}
