// Where a recovery takes its state from: a healthy replica while no stage has stepped,
// else the snapshot every stage holds (actors/fault/restore_source.hpp).
#include <doctest/doctest.h>

#include "actors/fault/restore_source.hpp"

using namespace conveyor;
using Kind = RestoreSource::Kind;

namespace {

const ReplicaLayout kTwoByTwo{2, 2};  // actors: 0 = r0 s0, 1 = r0 s1, 2 = r1 s0, 3 = r1 s1

}  // namespace

TEST_CASE("a respawned actor of replica 1 copies replica 0's actor of the same stage, at the boundary") {
  const auto c = choose_restore_source(kTwoByTwo, {2}, 5, 4);
  REQUIRE(c);
  CHECK(c->kind == Kind::replicas);
  CHECK(c->steps_done == 5);  // the boundary, not the older snapshot
  CHECK(c->sources == std::map<int, int>{{2, 0}});
  CHECK(c->describe(kTwoByTwo) == "replica 0");
}

TEST_CASE("a respawned actor of replica 0 copies replica 1, and needs no snapshot") {
  const auto c = choose_restore_source(kTwoByTwo, {1}, 3, std::nullopt);
  REQUIRE(c);
  CHECK(c->kind == Kind::replicas);
  CHECK(c->sources == std::map<int, int>{{1, 3}});
  CHECK(c->describe(kTwoByTwo) == "replica 1");
}

TEST_CASE("actors of different stages and replicas each take a healthy replica of their own stage") {
  const ReplicaLayout three{3, 2};  // actor = replica·2 + stage
  const auto c = choose_restore_source(three, {0, 3}, 7, 7);
  REQUIRE(c);
  CHECK(c->sources == std::map<int, int>{{0, 2}, {3, 1}});
  CHECK(c->describe(three) == "replicas 0, 1");
  // Two replicas of stage 0 gone: the third still serves both.
  const auto d = choose_restore_source(three, {0, 2}, 7, std::nullopt);
  REQUIRE(d);
  CHECK(d->sources == std::map<int, int>{{0, 4}, {2, 4}});
  CHECK(d->describe(three) == "replica 2");
}

TEST_CASE("nothing respawned with replicas (a NaN rollback, a broken group): every stage keeps its state") {
  const auto c = choose_restore_source(kTwoByTwo, {}, 4, 4);
  REQUIRE(c);
  CHECK(c->kind == Kind::replicas);
  CHECK(c->steps_done == 4);
  CHECK(c->sources.empty());
  CHECK(c->describe(kTwoByTwo) == "kept");
}

TEST_CASE("inside the optimizer step (no boundary) the snapshot is the only source") {
  const auto c = choose_restore_source(kTwoByTwo, {2}, std::nullopt, 6);
  REQUIRE(c);
  CHECK(c->kind == Kind::snapshot);
  CHECK(c->steps_done == 6);
  CHECK(c->describe(kTwoByTwo) == "snapshot");
  CHECK_FALSE(choose_restore_source(kTwoByTwo, {2}, std::nullopt, std::nullopt));
}

TEST_CASE("every replica of a stage respawned: the snapshot, or no recovery without one") {
  const auto c = choose_restore_source(kTwoByTwo, {0, 2}, 5, 4);
  REQUIRE(c);
  CHECK(c->kind == Kind::snapshot);
  CHECK(c->steps_done == 4);
  CHECK_FALSE(choose_restore_source(kTwoByTwo, {0, 2}, 5, std::nullopt));
}

TEST_CASE("one replica always restores the snapshot, as before replicas existed") {
  const ReplicaLayout one{1, 4};
  const auto c = choose_restore_source(one, {2}, 3, 3);
  REQUIRE(c);
  CHECK(c->kind == Kind::snapshot);
  CHECK_FALSE(choose_restore_source(one, {2}, 3, std::nullopt));
  CHECK_FALSE(choose_restore_source(one, {}, 3, std::nullopt));  // a NaN rollback needs one too
}

TEST_CASE("with sharded optimizer state a respawned replica takes the snapshot, never a twin") {
  const auto c = choose_restore_source(kTwoByTwo, {2}, 5, 4, /*sharded_state=*/true);
  REQUIRE(c);
  CHECK(c->kind == Kind::snapshot);
  CHECK(c->steps_done == 4);
  CHECK_FALSE(choose_restore_source(kTwoByTwo, {2}, 5, std::nullopt, true));
  // Nothing respawned (a NaN rollback, a broken group): every stage keeps its own part.
  const auto kept = choose_restore_source(kTwoByTwo, {}, 5, std::nullopt, true);
  REQUIRE(kept);
  CHECK(kept->describe(kTwoByTwo) == "kept");
}
