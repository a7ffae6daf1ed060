// TrainCheckpoints::newest_checkpoint: where a lost node's replacement sends every stage
// back to without buddy copies. It must be this run's newest verified checkpoint, or a
// clear reason why there is none — never another run's, nor one it cannot load.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "actors/plan/pipeline_layout.hpp"
#include "apps/train/train_checkpoints.hpp"
#include "tests/actors/checkpoint/checkpoint_test_support.hpp"

using namespace conveyor;
using testing::ScratchDir;
using testing::small_snapshot;

namespace {

struct NoMetrics final : TrainingObserver {
  void on_step(const StepMetrics&, const std::vector<StageReport>&) override {}
  void on_eval(const EvalMetrics&) override {}
};

CheckpointSettings settings_for(const std::string& dir, std::int64_t first_step = 0) {
  CheckpointSettings s;
  s.dir = dir;
  s.every = 5;
  s.keep = 10;
  s.total_steps = 40;
  s.first_step = first_step;
  s.base = small_snapshot(0).manifest;  // seed, stages, partition of the snapshots below
  s.base.step = 0;
  s.base.optimizer_steps = 0;
  return s;
}

// Writes the checkpoint of `step` through `hook`, as the coordinator hands it over.
void take(TrainCheckpoints& hook, std::int64_t step) {
  auto snap = small_snapshot(step);
  hook.take(step, std::move(snap.shards), step, /*stop=*/false);
}

}  // namespace

TEST_CASE("the newest checkpoint of the run is found once its write ended, and one that fails verification is skipped") {
  ScratchDir dir("newest");
  NoMetrics metrics;
  TrainCheckpoints hook(metrics, settings_for(dir.path()), nullptr);
  auto none = hook.newest_checkpoint(3, CheckpointLayouts::current);
  CHECK(none.path.empty());
  CHECK(none.error.find(dir.path()) != std::string::npos);  // names the folder searched

  take(hook, 5);
  take(hook, 10);  // may still be writing: newest_checkpoint waits for it
  auto point = hook.newest_checkpoint(12, CheckpointLayouts::current);
  INFO(point.error);
  CHECK(point.error.empty());
  CHECK(point.step == 10);
  CHECK(std::filesystem::path(point.path).filename() == "step-000010");

  // A shard of step 10 damaged on disk: step 5 instead, verified.
  for (auto& f : std::filesystem::directory_iterator(point.path))
    if (f.path().extension() == ".safetensors") {
      std::fstream out(f.path(), std::ios::in | std::ios::out | std::ios::binary);
      out.seekp(-8, std::ios::end);
      out.write("garbage!", 8);
      break;
    }
  point = hook.newest_checkpoint(12, CheckpointLayouts::current);
  INFO(point.error);
  CHECK(point.step == 5);
  CHECK(std::filesystem::path(point.path).filename() == "step-000005");
  hook.flush();
}

TEST_CASE("a checkpoint outside the run's steps or of another job is refused, naming why") {
  ScratchDir dir("foreign");
  NoMetrics metrics;
  {
    TrainCheckpoints earlier(metrics, settings_for(dir.path()), nullptr);
    take(earlier, 10);
    earlier.flush();
  }
  // Newer than the steps this run trained (another run's, in a shared checkpoint.dir).
  TrainCheckpoints hook(metrics, settings_for(dir.path()), nullptr);
  auto point = hook.newest_checkpoint(8, CheckpointLayouts::current);
  CHECK(point.path.empty());
  CHECK(point.error.find("holds 10 steps, outside the steps 0 to 8 of this run") != std::string::npos);

  // Older than the step this run resumed from.
  TrainCheckpoints resumed(metrics, settings_for(dir.path(), /*first_step=*/20), nullptr);
  point = resumed.newest_checkpoint(25, CheckpointLayouts::current);
  CHECK(point.path.empty());
  CHECK(point.error.find("outside the steps 20 to 25") != std::string::npos);

  // Same steps, another seed: another job's weights must not be loaded.
  auto other = settings_for(dir.path());
  other.base.seed = 99;
  TrainCheckpoints other_job(metrics, other, nullptr);
  point = other_job.newest_checkpoint(12, CheckpointLayouts::current);
  CHECK(point.path.empty());
  CHECK(point.error.find("was written with another seed, stage count or partition") != std::string::npos);
}

TEST_CASE("after a re-layout a shrink may go back to a checkpoint of any layout the run ran on, a rejoin only to one of the current layout") {
  ScratchDir dir("relayout");
  NoMetrics metrics;
  TrainCheckpoints hook(metrics, settings_for(dir.path()), nullptr);
  take(hook, 10);  // small_snapshot's layout: 2 stages of one block each
  // The job moves onto 1 stage of both blocks (issue 44's shrink), before its next checkpoint.
  JobPlan one;
  const auto layout = make_pipeline_layout(sched::ScheduleSpec{"1f1b", 1, 4, 1}, 2, {4});
  one.schedule = layout.schedule;
  one.placement = layout.placement;
  hook.on_relayout(one);

  auto point = hook.newest_checkpoint(12, CheckpointLayouts::current);
  CHECK(point.path.empty());
  CHECK(point.error.find("another seed, stage count or partition than this run's now") != std::string::npos);
  point = hook.newest_checkpoint(12, CheckpointLayouts::any_of_the_run);
  INFO(point.error);
  CHECK(point.error.empty());
  CHECK(point.step == 10);

  // A layout this run never ran on stays refused: another job's checkpoint, newer, of 3 stages.
  auto three = settings_for(dir.path());
  three.base = small_snapshot(0, 3).manifest;
  TrainCheckpoints other(metrics, three, nullptr);
  auto snap = small_snapshot(11, 3);
  other.take(11, std::move(snap.shards), 11, /*stop=*/false);
  other.flush();
  point = hook.newest_checkpoint(12, CheckpointLayouts::any_of_the_run);
  CHECK(point.path.empty());
  CHECK(point.error.find("another seed, stage count or partition than any this run ran on") != std::string::npos);
  hook.flush();

  // A run resumed from a checkpoint of 3 stages (--resume reshards it onto its own) ran on
  // that layout too.
  auto resumed = settings_for(dir.path());
  resumed.resumed_layout.emplace(3, std::vector<std::int64_t>{2, 2, 2});
  TrainCheckpoints resumed_hook(metrics, resumed, nullptr);
  point = resumed_hook.newest_checkpoint(12, CheckpointLayouts::any_of_the_run);
  INFO(point.error);
  CHECK(point.step == 11);
  CHECK(resumed_hook.newest_checkpoint(12, CheckpointLayouts::current).path.empty());
}
