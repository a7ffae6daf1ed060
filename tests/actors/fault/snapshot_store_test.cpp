// The in-memory snapshot store: which step every stage can roll back to, and what it
// keeps.
#include <doctest/doctest.h>

#include "actors/fault/snapshot_store.hpp"

#include <stdexcept>

using namespace conveyor;

namespace {

StageStateSnapshot snap(std::int64_t steps_done, float value) {
  Tensor t = Tensor::zeros(Shape{4});
  for (auto& x : t.f32_span()) x = value;
  return {steps_done, {std::make_shared<TensorStateSnapshot>(std::vector<NamedTensor>{{"w", t}}, steps_done)}};
}

}  // namespace

TEST_CASE("the consistent step is the newest one every stage holds") {
  SnapshotStore store(3);
  CHECK_FALSE(store.consistent_step());
  for (int r = 0; r < 3; ++r) store.put(r, snap(0, 1.0f));
  CHECK(store.consistent_step() == 0);
  store.put(0, snap(1, 2.0f));
  store.put(2, snap(1, 2.0f));
  CHECK(store.consistent_step() == 0);  // stage 1 failed before its step-1 snapshot
  store.put(1, snap(1, 2.0f));
  CHECK(store.consistent_step() == 1);
}

TEST_CASE("two snapshots are kept per stage, a replay replaces the discarded newer ones") {
  SnapshotStore store(1);
  for (int k = 0; k < 4; ++k) store.put(0, snap(k, static_cast<float>(k)));
  CHECK(store.get(0, 1) == nullptr);
  REQUIRE(store.get(0, 2) != nullptr);
  CHECK(store.get(0, 3)->tensors()[0].tensor.f32()[0] == 3.0f);
  store.discard_after(2);
  CHECK(store.get(0, 3) == nullptr);
  CHECK(store.consistent_step() == 2);
  store.put(0, snap(3, 30.0f));
  CHECK(store.get(0, 3)->tensors()[0].tensor.f32()[0] == 30.0f);
  CHECK(store.bytes() == 2 * 4 * sizeof(float));
}

TEST_CASE("shards of a step come in rank order only when every stage holds it") {
  SnapshotStore store(2);
  store.put(1, snap(5, 1.0f));
  CHECK_FALSE(store.shards(5));
  store.put(0, snap(5, 2.0f));
  auto shards = store.shards(5);
  REQUIRE(shards);
  CHECK(shards->first.size() == 2);
  CHECK(shards->first[0].stage == 0);
  REQUIRE(shards->first[1].produce);  // converted where the checkpoint is written
  CHECK(shards->first[1].produce()[0].tensor.f32()[0] == 1.0f);
  CHECK(shards->second == 5);
  CHECK_THROWS_AS(store.put(2, snap(5, 0.0f)), std::out_of_range);
}

TEST_CASE("a marker counts for the consistent step but makes no shard, a copy replaces it, and a later marker does not replace the copy") {
  SnapshotStore store(2);
  store.put(0, snap(5, 1.0f));
  store.put_marker(1, 5);  // rank 1 holds step 5 in its own process
  CHECK(store.consistent_step() == 5);
  CHECK_FALSE(store.shards(5));
  store.put(1, snap(5, 2.0f));  // its copy, asked for by a checkpoint
  REQUIRE(store.shards(5));
  store.put_marker(1, 5);
  auto shards = store.shards(5);
  REQUIRE(shards);
  CHECK(shards->first[1].produce()[0].tensor.f32()[0] == 2.0f);
}

TEST_CASE("a reset for another layout forgets every snapshot and takes the new stage count") {
  SnapshotStore store(3);
  for (int r = 0; r < 3; ++r) store.put(r, StageStateSnapshot{4, {}, false});
  REQUIRE(store.consistent_step() == 4);
  store.reset(2);
  CHECK(store.ranks() == 2);
  CHECK_FALSE(store.consistent_step().has_value());
  CHECK(store.get(0, 4) == nullptr);
  CHECK_THROWS_AS(store.put(2, StageStateSnapshot{5, {}, false}), std::out_of_range);
  store.put(0, StageStateSnapshot{5, {}, false});
  store.put(1, StageStateSnapshot{5, {}, false});
  CHECK(store.consistent_step() == 5);
  CHECK_THROWS_AS(store.reset(0), std::invalid_argument);
}

TEST_CASE("the consistent step of some ranks looks only at theirs: the standby's copies of the leader's stages") {
  // Ranks 0 and 1 run on the leader; rank 2 is the standby's own, a step ahead.
  SnapshotStore store(3, 4);
  CHECK_FALSE(store.consistent_step({0, 1}));
  store.put(2, snap(3, 1.0f));
  for (int r : {0, 1}) store.put(r, snap(2, 1.0f));
  store.put(0, snap(3, 1.0f));  // rank 1's copy of step 3 still on its way
  CHECK(store.consistent_step({0, 1}) == 2);
  CHECK(store.consistent_step({0}) == 3);
  CHECK(store.consistent_step({2}) == 3);
  CHECK_FALSE(store.consistent_step());  // no step that all three hold
  CHECK_FALSE(store.consistent_step(std::vector<int>{}));
  CHECK_FALSE(store.consistent_step({0, 3}));  // no rank 3 here
}
