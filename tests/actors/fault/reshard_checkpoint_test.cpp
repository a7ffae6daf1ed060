// A checkpoint cut for another layout (actors/fault/reshard_checkpoint.hpp), what a shrink
// without buddy copies restores: three CPU stages written as a checkpoint and cut for two
// stages give exactly what the same stages' in-memory snapshots cut for two give (the
// shrink from buddy copies), tensor for tensor and byte for byte, with the manifest's
// step and AdamW step count; a checkpoint missing a stage's shard is refused by name.
#include <doctest/doctest.h>

#include <cstring>
#include <memory>

#include "actors/checkpoint/checkpoint_writer.hpp"
#include "actors/fault/reshard_checkpoint.hpp"
#include "actors/fault/reshard_snapshots.hpp"
#include "actors/plan/pipeline_layout.hpp"
#include "kernels/model/stage_model.hpp"
#include "tests/actors/checkpoint/checkpoint_test_support.hpp"
#include "tests/actors/fault/small_gpt.hpp"

using namespace conveyor;
using conveyor::fault_test::models_of;
using conveyor::fault_test::plan_of;

namespace {

// The checkpoint of `models` (one shard per stage) after `step` steps, `optimizer_steps` AdamW steps.
std::string write_of(const testing::ScratchDir& dir, const std::vector<std::unique_ptr<StageModel>>& models,
                     std::int64_t step, std::int64_t optimizer_steps, std::size_t shards) {
  checkpoint::Snapshot snap;
  snap.manifest.step = step;
  snap.manifest.optimizer_steps = optimizer_steps;
  snap.manifest.seed = 1234;
  snap.manifest.schedule = "1f1b";
  snap.manifest.stages = static_cast<int>(models.size());
  snap.manifest.partition_halves.assign(models.size(), 2);
  for (std::size_t k = 0; k < shards; ++k) {
    checkpoint::StageShard shard;
    shard.stage = static_cast<int>(k);
    shard.tensors = models[k]->capture_state();
    snap.shards.push_back(std::move(shard));
  }
  return checkpoint::write_checkpoint(checkpoint::posix_filesystem(), dir.path(), snap, 3).path;
}

// The same step and tensors (names, order, bytes); the AdamW step count is checked apart.
void check_same_bytes(const StageStateSnapshot& got, const StageStateSnapshot& want) {
  CHECK(got.steps_done == want.steps_done);
  const auto a = got.tensors();
  const auto b = want.tensors();
  REQUIRE(a.size() == b.size());
  for (std::size_t t = 0; t < a.size(); ++t) {
    INFO(b[t].name);
    CHECK(a[t].name == b[t].name);
    REQUIRE(a[t].tensor.bytes() == b[t].tensor.bytes());
    CHECK(std::memcmp(a[t].tensor.raw(), b[t].tensor.raw(), a[t].tensor.bytes()) == 0);
  }
}

}  // namespace

TEST_CASE("a checkpoint of three stages cut for two stages holds, byte for byte, what the same stages' snapshots cut for two hold") {
  const JobPlan three = plan_of({2, 2, 2});
  const JobPlan two = plan_of({3, 3});
  const auto models = models_of(three, 1234);
  testing::ScratchDir dir("reshard_checkpoint");
  const auto path = write_of(dir, models, 8, 7, 3);

  const auto cut = reshard_checkpoint(checkpoint::posix_filesystem(), path, two);
  CHECK(cut.steps_done == 8);
  REQUIRE(cut.states.size() == 2);

  SnapshotStore store(3);
  for (std::size_t r = 0; r < 3; ++r) store.put(static_cast<int>(r), StageStateSnapshot{8, {models[r]->snapshot()}, false});
  const auto want = reshard_snapshots(store, 8, three, two);
  for (std::size_t r = 0; r < 2; ++r) {
    INFO("new stage " << r);
    REQUIRE(cut.states[r].chunks.size() == 1);
    CHECK(cut.states[r].optimizer_steps() == 7);  // the manifest's
    check_same_bytes(cut.states[r], want[r]);
  }
}

TEST_CASE("a checkpoint without one stage's shard is refused naming the checkpoint and the missing tensors") {
  const JobPlan three = plan_of({2, 2, 2});
  const JobPlan two = plan_of({3, 3});
  testing::ScratchDir dir("reshard_checkpoint_missing");
  const auto path = write_of(dir, models_of(three, 1), 4, 4, 2);  // stage 2's shard left out
  try {
    reshard_checkpoint(checkpoint::posix_filesystem(), path, two);
    FAIL("a checkpoint missing stage 2's tensors was cut");
  } catch (const ReshardSnapshotsError& e) {
    const std::string what = e.what();
    CHECK(what.find(path) != std::string::npos);
    CHECK(what.find("missing") != std::string::npos);
  }
}
