// Data parallelism in one process (parallel.data, issue 9): R replicas of a P-stage
// pipeline, each on its share of every step's micro-batches, gradients averaged per stage
// across the replicas, train to the loss curve of one replica on the whole batch (within
// fp32 rounding: the gradient sums are grouped differently) and end bitwise identical.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "actors/runtime/run_job.hpp"
#include "tests/actors/support/tiny_job.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

constexpr int kStages = 2;
constexpr int kMicroBatches = 4;
constexpr std::int64_t kSteps = 20;

Job job_with(int replicas, const std::string& schedule = "1f1b") {
  TinyJobOptions o;
  o.stages = kStages;
  o.micro_batches = kMicroBatches;
  o.steps = kSteps;
  o.schedule = schedule;
  Job job = tiny_job(o);
  // Each replica's schedule runs its share; the job's micro_batches stay the global count.
  job.plan.schedule = make_pipeline_layout(
                     sched::ScheduleSpec{schedule, kStages, kMicroBatches / replicas, 1}, o.layers)
                     .schedule;
  job.plan.replicas = replicas;
  job.plan.eval_every = 10;
  return job;
}

double relative(double a, double b) { return std::fabs(a - b) / std::max(std::fabs(b), 1e-30); }

}  // namespace

TEST_CASE("2 replicas of a 2-stage pipeline follow the loss curve of one replica within 1e-6 and end bitwise identical") {
  RecordingObserver one_obs, two_obs;
  const TrainResult one = run_training(job_with(1), one_obs);
  const TrainResult two = run_training(job_with(2), two_obs);
  CHECK(one.replica_weights.empty());  // one replica: the path of a run without replicas

  REQUIRE(one_obs.steps.size() == kSteps);
  REQUIRE(two_obs.steps.size() == kSteps);
  double worst_loss = 0, worst_norm = 0;
  for (std::int64_t s = 0; s < kSteps; ++s) {
    CAPTURE(s);
    const double loss = relative(two_obs.steps[s].loss, one_obs.steps[s].loss);
    const double norm = relative(two_obs.steps[s].grad_norm, one_obs.steps[s].grad_norm);
    worst_loss = std::max(worst_loss, loss);
    worst_norm = std::max(worst_norm, norm);
    CHECK(loss <= 1e-6);
    CHECK(norm <= 1e-5);
  }
  MESSAGE("R=2 against R=1 over " << kSteps << " steps: worst relative loss difference "
                                  << worst_loss << ", gradient norm " << worst_norm);
  // The first step starts from the same weights on the same data: the same losses, bitwise.
  CHECK(two_obs.steps[0].loss == one_obs.steps[0].loss);
  REQUIRE(two_obs.evals.size() == one_obs.evals.size());
  for (std::size_t e = 0; e < one_obs.evals.size(); ++e)
    CHECK(relative(two_obs.evals[e].val_loss, one_obs.evals[e].val_loss) <= 1e-6);

  REQUIRE(two.replica_weights.size() == 2);
  CHECK(same_bits(two.replica_weights[0], two.replica_weights[1]));
  CHECK(same_bits(two.weights, two.replica_weights[0]));
  REQUIRE(two.weights.size() == one.weights.size());
  for (std::size_t i = 0; i < one.weights.size(); ++i) CHECK(two.weights[i].name == one.weights[i].name);
}

TEST_CASE("4 replicas of a gpipe pipeline, one micro-batch each, follow one replica's loss curve") {
  RecordingObserver one_obs, four_obs;
  run_training(job_with(1, "gpipe"), one_obs);
  const TrainResult four = run_training(job_with(4, "gpipe"), four_obs);
  REQUIRE(four_obs.steps.size() == one_obs.steps.size());
  for (std::size_t s = 0; s < one_obs.steps.size(); ++s) {
    CAPTURE(s);
    CHECK(relative(four_obs.steps[s].loss, one_obs.steps[s].loss) <= 1e-6);
  }
  REQUIRE(four.replica_weights.size() == 4);
  for (int r = 1; r < 4; ++r) CHECK(same_bits(four.replica_weights[0], four.replica_weights[r]));
}

// Issue 44, shrinking replicas: one replica that computes the step as the 2 configured
// replicas' shares (configured_replicas 2, StageData::gradient_shares) ends with the
// 2-replica run's weights bit for bit, where one plain replica does not.
namespace {

Job short_job(int replicas, const std::string& schedule) {
  TinyJobOptions o;
  o.stages = kStages;
  o.micro_batches = kMicroBatches;
  o.steps = 6;
  o.schedule = schedule;
  o.virtual_stages = schedule == "interleaved-1f1b" ? 2 : 1;
  Job job = tiny_job(o);
  job.plan.schedule = make_pipeline_layout(sched::ScheduleSpec{schedule, kStages, kMicroBatches / replicas,
                                                               o.virtual_stages},
                                           o.layers)
                          .schedule;
  job.plan.replicas = replicas;
  return job;
}

}  // namespace

TEST_CASE("one replica computing 2 configured replicas' shares ends with the 2-replica weights bitwise, on 1F1B, ZB-H1 and interleaved 1F1B") {
  for (const std::string schedule : {"1f1b", "zb-h1", "interleaved-1f1b"}) {
    CAPTURE(schedule);
    RecordingObserver two_obs, shrunk_obs, plain_obs;
    const TrainResult two = run_training(short_job(2, schedule), two_obs);
    Job shrunk_job = short_job(1, schedule);
    shrunk_job.plan.configured_replicas = 2;
    const TrainResult shrunk = run_training(shrunk_job, shrunk_obs);
    CHECK(same_bits(shrunk.weights, two.weights));
    REQUIRE(shrunk_obs.steps.size() == two_obs.steps.size());
    for (std::size_t s = 0; s < two_obs.steps.size(); ++s) {
      CAPTURE(s);
      CHECK(shrunk_obs.steps[s].grad_norm == two_obs.steps[s].grad_norm);
      CHECK(shrunk_obs.steps[s].loss == two_obs.steps[s].loss);
    }
    if (schedule == "1f1b") {  // the control: one replica without shares ends elsewhere
      const TrainResult plain = run_training(short_job(1, schedule), plain_obs);
      CHECK_FALSE(same_bits(plain.weights, two.weights));
    }
  }
}

// Issue 44, shrinking onto several replicas: 2 replicas standing for 3 (configured
// replicas 0 and 1 on the first, 2 on the second: 4 and 2 of the 6 micro-batches, each on
// a schedule of its own count) gather their shares over their group and end with the
// 3-replica weights bit for bit.
namespace {

Job six_micro_batch_job(int replicas, int configured, const std::string& schedule) {
  constexpr int kSix = 6;
  TinyJobOptions o;
  o.stages = kStages;
  o.micro_batches = kSix;
  o.steps = 6;
  o.schedule = schedule;
  Job job = tiny_job(o);
  job.plan.replicas = replicas;
  job.plan.configured_replicas = configured;
  const auto schedule_of = [&](int count) {
    return make_pipeline_layout(sched::ScheduleSpec{schedule, kStages, count, 1}, o.layers).schedule;
  };
  job.plan.schedule = schedule_of(job.plan.replica_share(0).count);
  if (job.plan.replica_share(0).count != job.plan.replica_share(replicas - 1).count)
    for (int r = 0; r < replicas; ++r) job.plan.replica_schedules.push_back(schedule_of(job.plan.replica_share(r).count));
  return job;
}

}  // namespace

TEST_CASE("2 replicas computing 3 configured replicas' shares (2 and 1) end with the 3-replica weights bitwise, on 1F1B and ZB-H1") {
  for (const std::string schedule : {"1f1b", "zb-h1"}) {
    CAPTURE(schedule);
    RecordingObserver three_obs, shrunk_obs;
    const TrainResult three = run_training(six_micro_batch_job(3, 0, schedule), three_obs);
    const TrainResult shrunk = run_training(six_micro_batch_job(2, 3, schedule), shrunk_obs);
    CHECK(same_bits(shrunk.weights, three.weights));
    REQUIRE(shrunk.replica_weights.size() == 2);
    CHECK(same_bits(shrunk.replica_weights[0], shrunk.replica_weights[1]));
    REQUIRE(shrunk_obs.steps.size() == three_obs.steps.size());
    for (std::size_t s = 0; s < three_obs.steps.size(); ++s) {
      CAPTURE(s);
      CHECK(shrunk_obs.steps[s].grad_norm == three_obs.steps[s].grad_norm);
      CHECK(shrunk_obs.steps[s].loss == three_obs.steps[s].loss);
    }
  }
}
