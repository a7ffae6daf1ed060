// The pure pieces of data parallelism: how a step's micro-batches are split among the
// replicas and how stage actors are numbered (how their final weights are assembled:
// tests/actors/coordinator/replica_weights_test.cpp).
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>

#include "actors/plan/pipeline_layout.hpp"
#include "actors/plan/replica_placement.hpp"

using namespace conveyor;

TEST_CASE("the replicas' micro-batch shares are consecutive and cover the step once") {
  CHECK(micro_batch_share(8, 1, 0) == MicroBatchShare{0, 8});
  CHECK(micro_batch_share(8, 2, 0) == MicroBatchShare{0, 4});
  CHECK(micro_batch_share(8, 2, 1) == MicroBatchShare{4, 4});
  for (int R : {1, 2, 3, 4, 6, 12}) {
    CAPTURE(R);
    std::vector<int> seen(12, 0);
    for (int r = 0; r < R; ++r) {
      const auto share = micro_batch_share(12, R, r);
      CHECK(share.count == 12 / R);
      CHECK(share.first == r * (12 / R));
      for (int mb = share.first; mb < share.first + share.count; ++mb) ++seen.at(mb);
    }
    for (int n : seen) CHECK(n == 1);
  }
}

TEST_CASE("a micro-batch share is refused when the replicas do not divide the step") {
  CHECK_THROWS_AS(micro_batch_share(8, 3, 0), std::invalid_argument);
  CHECK_THROWS_AS(micro_batch_share(8, 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(micro_batch_share(8, 2, 2), std::invalid_argument);
  CHECK_THROWS_AS(micro_batch_share(8, 2, -1), std::invalid_argument);
}

TEST_CASE("stage actors are numbered replica-major: replica r, stage s is actor r*P + s") {
  const ReplicaLayout layout{3, 4};
  CHECK(layout.actors() == 12);
  CHECK(layout.actor(0, 3) == 3);
  CHECK(layout.actor(2, 1) == 9);
  for (int a = 0; a < layout.actors(); ++a) {
    CAPTURE(a);
    CHECK(layout.actor(layout.replica_of(a), layout.stage_of(a)) == a);
  }
  CHECK(layout.replica_of(7) == 1);
  CHECK(layout.stage_of(7) == 3);
}

TEST_CASE("every replica's actor holds its pipeline stage's chunks, numbered as the actor") {
  const auto pipeline = make_pipeline_layout(sched::ScheduleSpec{"1f1b", 2, 4, 1}, 4).placement;
  const ReplicaLayout layout{2, 2};
  for (int a = 0; a < layout.actors(); ++a) {
    CAPTURE(a);
    const RankPlacement rank = replica_rank_placement(pipeline, layout, a);
    const RankPlacement& stage = pipeline.ranks.at(static_cast<std::size_t>(layout.stage_of(a)));
    CHECK(rank.rank == a);
    CHECK(rank.replica == layout.replica_of(a));
    CHECK(rank.device == stage.device);
    REQUIRE(rank.chunks.size() == stage.chunks.size());
    for (std::size_t c = 0; c < stage.chunks.size(); ++c) {
      CHECK(rank.chunks[c].model_stage == stage.chunks[c].model_stage);
      CHECK(rank.chunks[c].slice == stage.chunks[c].slice);
    }
  }
  // One replica: the placement as it was.
  const RankPlacement one = replica_rank_placement(pipeline, ReplicaLayout{1, 2}, 1);
  CHECK(one.rank == pipeline.ranks[1].rank);
  CHECK(one.replica == 0);
  CHECK_THROWS_AS(replica_rank_placement(pipeline, layout, 4), std::out_of_range);
  CHECK_THROWS_AS(replica_rank_placement(pipeline, ReplicaLayout{2, 3}, 0), std::out_of_range);
}

TEST_CASE("running replicas stand for contiguous configured replicas, the first ones taking one more") {
  CHECK(configured_shares(3, 3, 2) == ConfiguredShares{2, 1});
  CHECK(configured_shares(3, 1, 0) == ConfiguredShares{0, 3});
  CHECK(configured_shares(3, 2, 0) == ConfiguredShares{0, 2});
  CHECK(configured_shares(3, 2, 1) == ConfiguredShares{2, 1});
  CHECK(configured_shares(5, 3, 2) == ConfiguredShares{4, 1});
  CHECK(shares_micro_batches(6, 3, 2, 0) == MicroBatchShare{0, 4});
  CHECK(shares_micro_batches(6, 3, 2, 1) == MicroBatchShare{4, 2});
  // Where R' divides R it is micro_batch_share's split.
  for (int r = 0; r < 2; ++r) CHECK(shares_micro_batches(8, 4, 2, r) == micro_batch_share(8, 2, r));
  CHECK_THROWS_AS(configured_shares(2, 3, 0), std::invalid_argument);
  CHECK_THROWS_AS(configured_shares(3, 2, 2), std::invalid_argument);
}
