// A stage's state for a checkpoint: captured only between plans, as host copies of every
// chunk's parameters and AdamW moments, and restorable into a fresh stage.
#include <doctest/doctest.h>

#include <cstring>

#include "actors/worker/stage_worker.hpp"
#include "actors/runtime/empty_stage_model.hpp"
#include "kernels/model/param_state.hpp"
#include "tests/actors/support/tiny_job.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

StageModelFactory stateful() { return make_cpu_stage_model; }

// One 1-stage step: every action runs locally, so the worker finishes its plan alone.
void train_one_step(StageWorker& worker, const Job& job, std::int64_t round) {
  worker.begin(StepPlan{round, round - 1, Phase::train,
                        std::make_shared<const std::vector<sched::Action>>(job.plan.schedule.ranks[0])});
  worker.run_ready([](PipeMessage) { FAIL("a 1-stage plan sends nothing"); });
  REQUIRE(worker.finished());
  worker.take_report();
  worker.optimizer_step(job.plan.adamw, 1e-2, 1.0f);
}

}  // namespace

TEST_CASE("a stage's captured state holds each parameter, then its AdamW moments once a step was taken") {
  TinyJobOptions o;
  o.stages = 1;
  const Job job = tiny_job(o);
  StageWorker worker(job.plan.model, job.plan.placement.ranks[0], 1, job.plan.data, StageWorker::Clock::now(),
                     stateful());
  const auto params = worker.weights().model_stages.at(0).tensors;
  CHECK(worker.capture_state().size() == params.size());  // no optimizer state yet
  train_one_step(worker, job, 1);
  const auto state = worker.capture_state();
  REQUIRE(state.size() == 3 * params.size());
  CHECK(state[0].name == params[0].name);
  CHECK(state[1].name == "opt.m." + params[0].name);
  CHECK(state[2].name == "opt.v." + params[0].name);
  // A copy: the next step changes the worker, not what was captured.
  std::vector<float> before(state[0].tensor.f32_span().begin(), state[0].tensor.f32_span().end());
  train_one_step(worker, job, 2);
  CHECK(std::memcmp(before.data(), state[0].tensor.raw(), state[0].tensor.bytes()) == 0);
}

TEST_CASE("capturing a stage in the middle of a plan is refused") {
  TinyJobOptions o;
  o.stages = 1;
  const Job job = tiny_job(o);
  StageWorker worker(job.plan.model, job.plan.placement.ranks[0], 1, job.plan.data, StageWorker::Clock::now(),
                     stateful());
  worker.begin(StepPlan{1, 0, Phase::train,
                        std::make_shared<const std::vector<sched::Action>>(job.plan.schedule.ranks[0])});
  CHECK_THROWS_WITH_AS(worker.capture_state(), doctest::Contains("middle of a plan"), std::logic_error);
}

TEST_CASE("a stage built on a model without state access cannot be captured") {
  TinyJobOptions o;
  o.stages = 1;
  const Job job = tiny_job(o);
  StageWorker worker(job.plan.model, job.plan.placement.ranks[0], 1, job.plan.data, StageWorker::Clock::now(),
                     empty_stage_model_factory(job.plan.data.micro_batch_size));
  CHECK_THROWS_WITH_AS(worker.capture_state(), doctest::Contains("cannot be captured"), std::logic_error);
}

TEST_CASE("a CPU model restores what another captured and refuses a wrong shape untouched") {
  TinyJobOptions o;
  o.stages = 1;
  const Job job = tiny_job(o);
  StageWorker worker(job.plan.model, job.plan.placement.ranks[0], 1, job.plan.data, StageWorker::Clock::now(),
                     stateful());
  train_one_step(worker, job, 1);
  const auto state = worker.capture_state();
  const StageSlice slice = job.plan.placement.ranks[0].chunks[0].slice;
  auto fresh = make_cpu_stage_model(job.plan.model, slice, 99);
  auto bad = state;
  bad[0].tensor = Tensor::zeros(Shape{3});
  const auto untouched = fresh->capture_state();
  CHECK_THROWS_WITH_AS(fresh->restore_state(bad, 1), doctest::Contains(state[0].name.c_str()), StateMismatch);
  CHECK(std::memcmp(fresh->capture_state()[0].tensor.raw(), untouched[0].tensor.raw(),
                    untouched[0].tensor.bytes()) == 0);
  fresh->restore_state(state, 1);
  const auto again = fresh->capture_state();
  REQUIRE(again.size() == state.size());
  for (std::size_t i = 0; i < state.size(); ++i) {
    CAPTURE(state[i].name);
    CHECK(again[i].name == state[i].name);
    CHECK(std::memcmp(again[i].tensor.raw(), state[i].tensor.raw(), state[i].tensor.bytes()) == 0);
  }
}
