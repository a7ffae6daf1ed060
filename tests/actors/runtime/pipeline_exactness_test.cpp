// The pipeline split and the schedule must not change the arithmetic: the same job
// trained on 1, 2 or 4 stages, with GPipe or 1F1B, ends with bitwise-identical weights.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "actors/runtime/run_job.hpp"
#include "tests/actors/support/tiny_job.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

TrainResult train(int stages, const std::string& schedule, RecordingObserver& observer) {
  TinyJobOptions o;
  o.stages = stages;
  o.schedule = schedule;
  return run_training(tiny_job(o), observer);
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

}  // namespace

TEST_CASE("training on 1, 2 and 4 stages with gpipe and 1f1b gives bitwise-identical weights") {
  RecordingObserver ref_obs;
  const TrainResult ref = train(1, "1f1b", ref_obs);
  REQUIRE(ref.weights.size() == 2 + 4 * 12 + 3);
  REQUIRE(ref_obs.steps.size() == 3);
  for (int stages : {1, 2, 4})
    for (const char* schedule : {"gpipe", "1f1b"}) {
      CAPTURE(stages);
      CAPTURE(schedule);
      RecordingObserver obs;
      const TrainResult got = train(stages, schedule, obs);
      REQUIRE(got.weights.size() == ref.weights.size());
      for (std::size_t i = 0; i < ref.weights.size(); ++i) {
        CAPTURE(ref.weights[i].name);
        CHECK(got.weights[i].name == ref.weights[i].name);
        CHECK(bitwise_equal(got.weights[i].tensor, ref.weights[i].tensor));
      }
      for (std::size_t s = 0; s < obs.steps.size(); ++s) {
        CHECK(obs.steps[s].loss == ref_obs.steps[s].loss);
        CHECK(obs.steps[s].grad_norm == ref_obs.steps[s].grad_norm);
      }
      CHECK(got.final_val_loss == ref.final_val_loss);
    }
}

TEST_CASE("training changes the weights and reports finite losses") {
  RecordingObserver obs;
  TinyJobOptions o;
  const Job job = tiny_job(o);
  const TrainResult result = run_training(job, obs);
  REQUIRE(obs.steps.size() == 3);
  for (const auto& s : obs.steps) {
    CHECK(std::isfinite(s.loss));
    CHECK(s.loss > 0.0);
    CHECK(s.grad_norm > 0.0);
    CHECK(s.tokens_per_s > 0.0);
  }
  REQUIRE(obs.evals.size() == 1);  // after the last step
  CHECK(std::isfinite(obs.evals[0].val_loss));
  // Initial weights from a fresh stage differ from the trained ones.
  GptStage fresh(job.plan.model, job.plan.placement.ranks[0].chunks[0].slice, job.plan.data.seed);
  CHECK_FALSE(bitwise_equal(fresh.params()[0].value, result.weights[0].tensor));
}

TEST_CASE("every schedule, interleaved and zero-bubble included, gives the weights of 1f1b") {
  RecordingObserver ref_obs;
  const TrainResult ref = train(1, "1f1b", ref_obs);
  struct Case {
    int stages;
    const char* schedule;
    int virtual_stages;
  };
  for (const Case& c : {Case{2, "zb-h1", 1}, Case{4, "zb-h1", 1}, Case{2, "interleaved-1f1b", 2},
                        Case{2, "zbv", 1}, Case{3, "gpipe", 1}}) {
    CAPTURE(c.stages);
    CAPTURE(c.schedule);
    TinyJobOptions o;
    o.stages = c.stages;
    o.schedule = c.schedule;
    o.virtual_stages = c.virtual_stages;
    RecordingObserver obs;
    const TrainResult got = run_training(tiny_job(o), obs);
    REQUIRE(got.weights.size() == ref.weights.size());
    for (std::size_t i = 0; i < ref.weights.size(); ++i) {
      CAPTURE(ref.weights[i].name);
      CHECK(got.weights[i].name == ref.weights[i].name);
      CHECK(bitwise_equal(got.weights[i].tensor, ref.weights[i].tensor));
    }
    CHECK(got.final_val_loss == ref.final_val_loss);
  }
}
