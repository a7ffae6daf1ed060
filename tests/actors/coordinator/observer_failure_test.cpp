// An exception out of the coordinator's observer (the metrics file on a full disk) fails
// the run at once with its message: the coordinator must not die silently and leave the
// stages waiting for plans until the watchdog gives up.
#include <doctest/doctest.h>

#include <chrono>
#include <stdexcept>

#include "actors/runtime/run_job.hpp"
#include "tests/actors/support/tiny_job.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

struct FailingObserver final : TrainingObserver {
  std::int64_t fail_at_step = 0;
  int steps_seen = 0;
  void on_step(const StepMetrics& m, const std::vector<StageReport>&) override {
    ++steps_seen;
    if (m.step == fail_at_step) throw std::runtime_error("metrics.jsonl: write failed: No space left on device");
  }
  void on_eval(const EvalMetrics&) override {}
};

}  // namespace

TEST_CASE("an observer that throws fails the run with its message, at once") {
  for (int stages : {1, 3}) {
    CAPTURE(stages);
    TinyJobOptions o;
    o.stages = stages;
    o.steps = 6;
    Job job = tiny_job(o);
    job.plan.watchdog_timeout_s = 120;  // were the run left waiting, this is what would end it
    FailingObserver observer;
    observer.fail_at_step = 2;
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH_AS(run_training(job, observer),
                         doctest::Contains("metrics.jsonl: write failed: No space left on device"),
                         std::runtime_error);
    CHECK(observer.steps_seen == 3);  // steps 0, 1 and the failing 2: nothing after it
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(60));
  }
}
