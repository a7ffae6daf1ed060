// The in-memory snapshots of one step cut for another layout (actors/fault/reshard_snapshots.hpp):
// three CPU stages' snapshots in a SnapshotStore, cut for the 2-stage plan that
// replan() would choose, restored into fresh 2-stage models: these hold exactly the
// tensors the 3 stages held, under the same names; a stage without its snapshot is named.
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <memory>

#include "actors/fault/reshard_snapshots.hpp"
#include "actors/plan/pipeline_layout.hpp"
#include "kernels/model/stage_model.hpp"
#include "tests/actors/fault/small_gpt.hpp"

using namespace conveyor;
using conveyor::fault_test::models_of;
using conveyor::fault_test::plan_of;

namespace {

std::map<std::string, std::vector<float>> by_name(const std::vector<std::unique_ptr<StageModel>>& models) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& m : models)
    for (const auto& t : m->capture_state()) {
      std::vector<float> v(static_cast<std::size_t>(t.tensor.numel()));
      std::memcpy(v.data(), t.tensor.raw(), t.tensor.bytes());
      out.emplace(t.name, std::move(v));
    }
  return out;
}

void put_all(SnapshotStore& store, const std::vector<std::unique_ptr<StageModel>>& models, std::int64_t step) {
  for (std::size_t r = 0; r < models.size(); ++r)
    store.put(static_cast<int>(r), StageStateSnapshot{step, {models[r]->snapshot()}, false});
}

}  // namespace

TEST_CASE("three stages' snapshots cut for two stages restore the same tensors under the same names") {
  const JobPlan three = plan_of({2, 2, 2});
  const JobPlan two = plan_of({3, 3});
  const auto old_models = models_of(three, 1234);
  SnapshotStore store(3);
  put_all(store, old_models, 5);

  const auto cut = reshard_snapshots(store, 5, three, two);
  REQUIRE(cut.size() == 2);
  auto fresh = models_of(two, 99);  // another seed: every value differs before the restore
  CHECK(by_name(fresh) != by_name(old_models));
  for (std::size_t r = 0; r < 2; ++r) {
    CHECK(cut[r].steps_done == 5);
    REQUIRE(cut[r].chunks.size() == 1);
    fresh[r]->restore_snapshot(*cut[r].chunks[0]);
  }
  CHECK(by_name(fresh) == by_name(old_models));
}

TEST_CASE("every replica of the new plan gets the pipeline's state, read from replica 0 of the old") {
  const JobPlan from = plan_of({3, 3}, 2);
  const JobPlan to = plan_of({6}, 2);
  SnapshotStore store(4);
  const auto models = models_of(from, 7);
  put_all(store, models, 3);
  // Replica 1's actors hold their own snapshots too; only replica 0's are read.
  put_all(store, models, 3);
  const auto cut = reshard_snapshots(store, 3, from, to);
  REQUIRE(cut.size() == 2);
  CHECK(cut[0].chunks[0] == cut[1].chunks[0]);
}

TEST_CASE("a stage without its snapshot of the step, or with only a marker, is named") {
  const JobPlan three = plan_of({2, 2, 2});
  const JobPlan two = plan_of({3, 3});
  const auto models = models_of(three, 1);
  SnapshotStore store(3);
  store.put(0, StageStateSnapshot{4, {models[0]->snapshot()}, false});
  store.put_marker(1, 4);
  store.put(2, StageStateSnapshot{4, {models[2]->snapshot()}, false});
  CHECK_THROWS_WITH_AS(reshard_snapshots(store, 4, three, two),
                       "stage 1 holds no snapshot of step 4 here (only in its own process)", ReshardSnapshotsError);
  CHECK_THROWS_WITH_AS(reshard_snapshots(store, 3, three, two), "stage 0 holds no snapshot of step 3 here",
                       ReshardSnapshotsError);
}

TEST_CASE("a shrink and a grow back (3 stages cut for 2, then for 3 again) restore the starting tensors bit for bit") {
  const JobPlan three = plan_of({2, 2, 2});
  const JobPlan two = plan_of({3, 3});
  const auto start = models_of(three, 1234);
  SnapshotStore store(3);
  put_all(store, start, 5);
  // The shrink: two stages restored from the cut, snapshotted again at the same step.
  auto shrunk = models_of(two, 7);
  const auto down = reshard_snapshots(store, 5, three, two);
  for (std::size_t r = 0; r < 2; ++r) shrunk[r]->restore_snapshot(*down[r].chunks.at(0));
  SnapshotStore shrunk_store(2);
  put_all(shrunk_store, shrunk, 5);
  // The grow: three stages again, from the two stages' snapshots.
  const auto up = reshard_snapshots(shrunk_store, 5, two, three);
  REQUIRE(up.size() == 3);
  auto grown = models_of(three, 99);
  for (std::size_t r = 0; r < 3; ++r) {
    CHECK(up[r].steps_done == 5);
    REQUIRE(up[r].chunks.size() == 1);
    grown[r]->restore_snapshot(*up[r].chunks[0]);
  }
  CHECK(by_name(grown) == by_name(start));
  // Stage by stage, not only pooled: each of the three holds exactly its starting tensors.
  for (std::size_t r = 0; r < 3; ++r) {
    const auto got = grown[r]->capture_state();
    const auto want = start[r]->capture_state();
    REQUIRE(got.size() == want.size());
    for (std::size_t t = 0; t < got.size(); ++t) {
      CHECK(got[t].name == want[t].name);
      REQUIRE(got[t].tensor.bytes() == want[t].tensor.bytes());
      CHECK(std::memcmp(got[t].tensor.raw(), want[t].tensor.raw(), got[t].tensor.bytes()) == 0);
    }
  }
}
