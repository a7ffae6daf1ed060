// The pure pieces of data parallelism: how a step's micro-batches are split among the
// replicas, how stage actors are numbered, and how the replicas' final weights are
// assembled and compared.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>

#include "actors/coordinator/replica_weights.hpp"
#include "actors/replica_placement.hpp"
#include "actors/runtime/pipeline_layout.hpp"

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

namespace {

NamedTensor filled(const std::string& name, float value, int n = 3) {
  Tensor t = Tensor::zeros(Shape{n});
  for (auto& x : t.f32_span()) x = value;
  return NamedTensor{name, t};
}

// Actor `rank` of a 2-stage pipeline: model stage = its stage, one tensor named after it.
WeightsReply reply(int rank, float value) {
  const int stage = rank % 2;
  return WeightsReply{rank, {ModelStageWeights{stage, {filled("p" + std::to_string(stage), value)}}}};
}

}  // namespace

TEST_CASE("replica weights are assembled per replica in model order, whatever the reply order") {
  const ReplicaLayout layout{2, 2};
  const auto models = weights_by_replica({reply(3, 1.f), reply(0, 1.f), reply(2, 1.f), reply(1, 1.f)},
                                         layout);
  REQUIRE(models.size() == 2);
  for (const auto& m : models) {
    REQUIRE(m.size() == 2);
    CHECK(m[0].name == "p0");
    CHECK(m[1].name == "p1");
  }
  CHECK_FALSE(replica_difference(models).has_value());
  CHECK_THROWS_AS(weights_by_replica({reply(4, 1.f)}, layout), std::logic_error);
}

TEST_CASE("a replica whose weights differ from replica 0's in one bit is named") {
  const ReplicaLayout layout{2, 2};
  auto models = weights_by_replica({reply(0, 1.f), reply(1, 1.f), reply(2, 1.f), reply(3, 1.f)}, layout);
  models[1][1].tensor.f32()[2] = std::nextafter(1.f, 2.f);
  const auto diff = replica_difference(models);
  REQUIRE(diff.has_value());
  CHECK(*diff == "replica 1 differs from replica 0 in p1");
}
