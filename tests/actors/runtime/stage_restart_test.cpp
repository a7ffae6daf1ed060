// Stage-actor restart and rollback (fault.policy restart, fault.on_nan rollback) on the
// CPU, 4 stages: every injected fault ends with weights bitwise identical to the run
// without it, and each recovery takes under a second from detection.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <cstring>
#include <random>

#include "actors/runtime/run_job.hpp"
#include "actors/fault/fault_spec.hpp"
#include "tests/actors/support/tiny_job.hpp"
#include "tests/support/test_seed.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

Job four_stage_job(std::int64_t steps = 6, const std::string& schedule = "1f1b",
                           int virtual_stages = 1) {
  TinyJobOptions o;
  o.stages = 4;
  o.steps = steps;
  o.layers = 4 * virtual_stages;
  o.schedule = schedule;
  o.virtual_stages = virtual_stages;
  Job job = tiny_job(o);
  job.plan.eval_every = 2;
  return job;
}

Job with_faults(Job job, std::vector<std::string> entries) {
  std::vector<FaultSpec> specs;
  for (const auto& e : entries) specs.push_back(parse_fault_spec(e));
  job.services.fault = std::make_shared<ScriptedFaults>(std::move(specs));
  job.plan.recovery.policy = FaultPolicy::restart;
  return job;
}

TrainResult run(const Job& job, RecordingObserver& observer) {
  return run_training(job, observer);
}

}  // namespace

TEST_CASE("a stage that crashes at a random step is respawned and the run ends bitwise identical") {
  RecordingObserver clean_obs;
  const TrainResult clean = run(four_stage_job(), clean_obs);

  std::mt19937 pick(testing::test_seed());
  const int stage = static_cast<int>(pick() % 4);
  const int step = static_cast<int>(pick() % 6);
  CAPTURE(stage);
  CAPTURE(step);
  RecordingObserver obs;
  const TrainResult recovered =
      run(with_faults(four_stage_job(), {fmt::format("crash:stage={}:step={}", stage, step)}), obs);
  CHECK(same_bits(clean.weights, recovered.weights));
  REQUIRE(obs.recoveries.size() == 1);
  const auto& e = obs.recoveries[0];
  CHECK(e.fault == "crash");
  CHECK(e.stages == std::vector<int>{stage});
  CHECK(e.respawned == std::vector<int>{stage});
  CHECK(e.step == step);
  CHECK(e.restored_step == step);  // a snapshot after every step: nothing else replayed
  CHECK(e.recovery_ms < 1000.0);
  CHECK(e.reason.find("injected crash") != std::string::npos);
  // The loss curve is the clean one: the replayed step reports once, with the same loss.
  REQUIRE(obs.steps.size() == clean_obs.steps.size());
  for (std::size_t i = 0; i < obs.steps.size(); ++i) CHECK(obs.steps[i].loss == clean_obs.steps[i].loss);
}

TEST_CASE("a crash during the optimizer step, with peers already past it, rolls every stage back to the step's start") {
  RecordingObserver clean_obs;
  const TrainResult clean = run(four_stage_job(), clean_obs);
  for (int stage : {0, 3}) {
    CAPTURE(stage);
    RecordingObserver obs;
    const TrainResult recovered = run(
        with_faults(four_stage_job(), {fmt::format("crash:stage={}:step=2:when=optimizer", stage)}), obs);
    CHECK(same_bits(clean.weights, recovered.weights));
    REQUIRE(obs.recoveries.size() == 1);
    // The other stages may have stepped and snapshotted step 3: the crashed one has not,
    // so step 2's start is the newest state every stage holds.
    CHECK(obs.recoveries[0].restored_step == 2);
    CHECK(obs.recoveries[0].reason.find("optimizer step of step 2") != std::string::npos);
    REQUIRE(obs.steps.size() == clean_obs.steps.size());
    for (std::size_t i = 0; i < obs.steps.size(); ++i) CHECK(obs.steps[i].loss == clean_obs.steps[i].loss);
  }
}

TEST_CASE("snapshots every 2 steps: a crash rolls back to the older snapshot and replays both steps") {
  RecordingObserver clean_obs;
  const TrainResult clean = run(four_stage_job(), clean_obs);
  Job job = with_faults(four_stage_job(), {"crash:stage=2:step=3"});
  job.plan.recovery.snapshot_every = 2;
  RecordingObserver obs;
  const TrainResult recovered = run(job, obs);
  CHECK(same_bits(clean.weights, recovered.weights));
  REQUIRE(obs.recoveries.size() == 1);
  CHECK(obs.recoveries[0].step == 3);
  CHECK(obs.recoveries[0].restored_step == 2);
  CHECK(obs.steps.size() == clean_obs.steps.size() + 1);  // step 2 reported twice
}

TEST_CASE("an interleaved pipeline (2 chunks per stage) recovers from a crash bitwise") {
  RecordingObserver a, b;
  const TrainResult clean = run(four_stage_job(4, "interleaved-1f1b", 2), a);
  const TrainResult recovered =
      run(with_faults(four_stage_job(4, "interleaved-1f1b", 2), {"crash:stage=1:step=2"}), b);
  CHECK(same_bits(clean.weights, recovered.weights));
  CHECK(b.recoveries.size() == 1);
}

TEST_CASE("a hung stage is diagnosed by the watchdog, replaced, and the run ends bitwise identical") {
  RecordingObserver clean_obs;
  const TrainResult clean = run(four_stage_job(), clean_obs);
  Job job = with_faults(four_stage_job(), {"hang:stage=2:step=3"});
  job.plan.watchdog_timeout_s = 1.0;  // well above any action or wait of this job, even on a loaded machine
  RecordingObserver obs;
  const TrainResult recovered = run(job, obs);
  CHECK(same_bits(clean.weights, recovered.weights));
  REQUIRE(obs.recoveries.size() == 1);
  const auto& e = obs.recoveries[0];
  CHECK(e.fault == "hang");
  CHECK(e.respawned == std::vector<int>{2});
  CHECK(e.step == 3);
  CHECK(e.recovery_ms < 1000.0);
}

TEST_CASE("fault.on_nan rollback: a transient NaN is rolled back and the run ends bitwise identical") {
  RecordingObserver clean_obs;
  const TrainResult clean = run(four_stage_job(), clean_obs);
  TinyJobOptions o;
  Job job = with_faults(four_stage_job(), {"nan:stage=1:step=2"});
  job.plan.recovery.policy = FaultPolicy::abort;  // rollback does not need restarts
  job.plan.on_nan = NanPolicy::rollback;
  RecordingObserver obs;
  const TrainResult recovered = run(job, obs);
  CHECK(same_bits(clean.weights, recovered.weights));
  REQUIRE(obs.recoveries.size() == 1);
  CHECK(obs.recoveries[0].fault == "nan");
  CHECK(obs.recoveries[0].respawned.empty());
  CHECK(obs.recoveries[0].recovery_ms < 1000.0);
}

TEST_CASE("beyond fault.max_restarts the run stops naming the budget") {
  Job job = with_faults(four_stage_job(), {"crash:stage=0:step=1", "crash:stage=1:step=2",
                                                   "crash:stage=3:step=3"});
  job.plan.recovery.max_restarts = 2;
  RecordingObserver obs;
  CHECK_THROWS_WITH_AS(run(job, obs), doctest::Contains("fault.max_restarts"), std::runtime_error);
  CHECK(obs.recoveries.size() == 2);
}

TEST_CASE("fault.policy abort: a crash still stops the run naming the stage") {
  Job job = with_faults(four_stage_job(), {"crash:stage=1:step=1"});
  job.plan.recovery.policy = FaultPolicy::abort;
  RecordingObserver obs;
  CHECK_THROWS_WITH_AS(run(job, obs), doctest::Contains("stage 1 failed"), std::runtime_error);
  CHECK(obs.recoveries.empty());
}
