// How the replicas' final weights are assembled in model order and compared bit for bit
// (the coordinator's end of a data-parallel run).
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "actors/coordinator/replica_weights.hpp"
#include "actors/plan/pipeline_layout.hpp"

using namespace conveyor;

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
