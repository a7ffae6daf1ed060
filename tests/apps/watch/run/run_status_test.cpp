// The status of a run folder written by train's writers (run_fixture.hpp), read as it
// grows: steps, loss, evaluations, stage busy shares against the plan, recoveries by kind,
// checkpoint seconds, and a half-written last row.
#include <doctest/doctest.h>

#include <fstream>

#include "apps/watch/run_folder.hpp"
#include "kernels/common/error.hpp"
#include "tests/apps/watch/run/run_fixture.hpp"
#include "tests/support/temp_dir.hpp"

using namespace conveyor::watch;
using conveyor::testing::RunFixture;
using conveyor::testing::TempDir;

TEST_CASE("a run folder's status follows the rows as train writes them") {
  TempDir dir;
  RunFixture run(dir.path());
  RunFolder folder(dir.path());
  folder.refresh();
  {
    const auto& s = folder.status();
    CHECK(s.state == RunState::starting);
    CHECK(s.steps_done() == 0);
    CHECK(s.total_steps == 10);
    CHECK(s.schedule == "1f1b");
    CHECK(s.pipeline_stages == 4);
    REQUIRE(s.stages.size() == 4);
    CHECK(s.stages[3].device == "cpu");  // placement as plan.json writes it
    CHECK(s.model_flops_per_token > 0);
  }
  for (int k = 0; k < 3; ++k) run.step(k);
  run.eval(2, 4.5);
  folder.refresh();
  {
    const auto& s = folder.status();
    CHECK(s.state == RunState::running);
    CHECK(s.steps_done() == 3);
    REQUIRE(s.last_step);
    CHECK(s.last_step->loss == doctest::Approx(4.8));
    CHECK(s.last_step->tokens_per_s == 1002.0);
    CHECK(s.eval_loss == 4.5);
    CHECK(s.loss_curve.size() == 3);
    for (int r = 0; r < 4; ++r) CHECK(s.stages[r].busy_ratio == doctest::Approx((r + 1) * 0.1));
    REQUIRE(s.eta_seconds());
    CHECK(*s.eta_seconds() == doctest::Approx(7 * 0.1));  // 7 steps left at 100 ms
    CHECK(s.model_flops_per_s() == doctest::Approx(1002.0 * *s.model_flops_per_token));
    CHECK_FALSE(s.model_flops_utilization());  // CPU stages: no known peak
  }
  run.crash(3);
  run.checkpoint(3, 0.75);
  run.step(3);
  folder.refresh();
  const auto& s = folder.status();
  CHECK(s.recoveries.at("crash") == 1);
  REQUIRE(s.recent_recoveries.size() == 1);
  CHECK(s.recent_recoveries[0].stages == std::vector<int>{2});
  CHECK(s.checkpoints == 1);
  REQUIRE(s.last_checkpoint);
  CHECK(s.last_checkpoint->seconds == 0.75);
  CHECK(s.last_checkpoint->step == 3);
  CHECK(s.steps_done() == 4);
  CHECK(s.unknown_rows == 0);
  CHECK(s.unreadable_rows == 0);
}

TEST_CASE("steps replayed after a recovery replace their points on the loss curve") {
  TempDir dir;
  RunFixture run(dir.path());
  for (int k = 0; k < 4; ++k) run.step(k);
  run.crash(3);  // back at step 2: steps 2 and 3 come again
  run.step(2);
  RunFolder folder(dir.path());
  folder.refresh();
  CHECK(folder.status().steps_done() == 3);
  run.step(3);
  folder.refresh();
  const auto& curve = folder.status().loss_curve;
  REQUIRE(curve.size() == 4);
  for (std::size_t i = 0; i < curve.size(); ++i) CHECK(curve[i].step == static_cast<std::int64_t>(i));
  CHECK(folder.status().recoveries.at("crash") == 1);
}

TEST_CASE("a half-written last row is applied once its newline comes") {
  TempDir dir;
  RunFixture run(dir.path());
  run.step(0);
  RunFolder folder(dir.path());
  // A row train is writing: its first half now, the rest later.
  const std::string row = R"({"step":1,"loss":4.0,"lr":0.001,"grad_norm":0.5,"tokens_per_s":1,"step_ms":100,)"
                          R"("bubble":0.25,"stage_busy_ms":[1,2,3,4]})";
  std::ofstream(dir.path() / "metrics.jsonl", std::ios::app) << row.substr(0, 30);
  folder.refresh();
  CHECK(folder.status().steps_done() == 1);
  CHECK(folder.status().unreadable_rows == 0);
  std::ofstream(dir.path() / "metrics.jsonl", std::ios::app) << row.substr(30) << "\n";
  folder.refresh();
  CHECK(folder.status().steps_done() == 2);
  CHECK(folder.status().last_step->loss == 4.0);
}

TEST_CASE("a folder that is not a run folder is refused naming it") {
  TempDir dir;
  CHECK_THROWS_WITH_AS(check_run_folder(dir.path()), doctest::Contains("not a run folder"), conveyor::InputError);
  CHECK_THROWS_WITH_AS(check_run_folder(dir.path() / "nope"), doctest::Contains("does not exist"),
                       conveyor::InputError);
}
