// /metrics and /api/status of a run folder written by train's writers: every metric
// family the issue names with its HELP and TYPE, the stage rows labelled with the plan's
// devices, recoveries by kind, and the same facts in the JSON.
#include <doctest/doctest.h>

#include <sstream>

#include "apps/watch/prometheus_text.hpp"
#include "apps/watch/run_folder.hpp"
#include "apps/watch/status_json.hpp"
#include "tests/apps/watch/run/run_fixture.hpp"
#include "tests/support/temp_dir.hpp"

using namespace conveyor::watch;
using conveyor::testing::RunFixture;
using conveyor::testing::TempDir;

namespace {

RunStatus fixture_status(const TempDir& dir) {
  RunFixture run(dir.path());
  for (int k = 0; k < 4; ++k) run.step(k);
  run.eval(3, 4.25);
  run.crash(4);
  run.checkpoint(4, 1.5);
  RunFolder folder(dir.path());
  folder.refresh();
  return folder.status();
}

bool has_line(const std::string& text, const std::string& line) {
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (l == line) return true;
  return false;
}

}  // namespace

TEST_CASE("metrics has HELP and TYPE for every family the issue names") {
  TempDir dir;
  const std::string text = prometheus_text(fixture_status(dir));
  const std::pair<const char*, const char*> families[] = {
      {"conveyor_step", "gauge"},
      {"conveyor_loss", "gauge"},
      {"conveyor_eval_loss", "gauge"},
      {"conveyor_tokens_per_second", "gauge"},
      {"conveyor_model_flops_utilization", "gauge"},
      {"conveyor_stage_busy_ratio", "gauge"},
      {"conveyor_bubble_ratio", "gauge"},
      {"conveyor_recoveries_total", "counter"},
      {"conveyor_checkpoint_seconds", "gauge"},
      {"conveyor_steps_planned", "gauge"},
      {"conveyor_eta_seconds", "gauge"},
      {"conveyor_run_finished", "gauge"},
  };
  for (const auto& [name, type] : families) {
    CAPTURE(name);
    CHECK(text.find(std::string("# HELP ") + name + " ") != std::string::npos);
    CHECK(has_line(text, std::string("# TYPE ") + name + " " + type));
  }
  CHECK(text.back() == '\n');
}

TEST_CASE("metrics samples carry the run's values and the plan's stage labels") {
  TempDir dir;
  const std::string text = prometheus_text(fixture_status(dir));
  CHECK(has_line(text, "conveyor_step 4"));
  CHECK(has_line(text, "conveyor_steps_planned 10"));
  CHECK(has_line(text, "conveyor_loss 4.7"));
  CHECK(has_line(text, "conveyor_eval_loss 4.25"));
  CHECK(has_line(text, "conveyor_tokens_per_second 1003"));
  CHECK(has_line(text, "conveyor_bubble_ratio 0.25"));
  CHECK(has_line(text, "conveyor_checkpoint_seconds 1.5"));
  CHECK(has_line(text, "conveyor_stage_busy_ratio{stage=\"0\",device=\"cpu\",node=\"0\"} 0.1"));
  CHECK(has_line(text, "conveyor_stage_busy_ratio{stage=\"3\",device=\"cpu\",node=\"0\"} 0.4"));
  CHECK(has_line(text, "conveyor_recoveries_total{kind=\"crash\"} 1"));
  CHECK(has_line(text, "conveyor_recoveries_total{kind=\"hang\"} 0"));
  CHECK(has_line(text, "conveyor_run_finished 0"));
  // CPU stages: no peak to divide by, so the family has no sample rather than a made-up one.
  CHECK(text.find("\nconveyor_model_flops_utilization ") == std::string::npos);
  // Every line is a comment or NAME[{labels}] VALUE.
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    CAPTURE(l);
    CHECK((l.starts_with("# HELP conveyor_") || l.starts_with("# TYPE conveyor_") ||
           (l.starts_with("conveyor_") && l.rfind(' ') != std::string::npos)));
  }
}

TEST_CASE("status JSON holds the same facts as the metrics and the curves") {
  TempDir dir;
  const auto j = status_json(fixture_status(dir));
  CHECK(j.at("state") == "running");
  CHECK(j.at("step") == 4);
  CHECK(j.at("steps") == 10);
  CHECK(j.at("eval_loss") == 4.25);
  CHECK(j.at("last_step").at("tokens_per_s") == 1003.0);
  CHECK(j.at("job").at("schedule") == "1f1b");
  CHECK(j.at("job").at("model").at("layers") == 4);
  REQUIRE(j.at("stages").size() == 4);
  CHECK(j.at("stages")[1].at("device") == "cpu");
  CHECK(j.at("stages")[1].at("busy_ratio").get<double>() == doctest::Approx(0.2));
  CHECK(j.at("curves").at("loss").size() == 4);
  CHECK(j.at("curves").at("eval_loss")[0] == nlohmann::json::array({3, 4.25}));
  CHECK(j.at("recoveries").at("total").at("crash") == 1);
  CHECK(j.at("recoveries").at("recent")[0].at("reason") == "stage 2 \"crashed\"\nbadly");
  CHECK(j.at("checkpoints").at("last").at("seconds") == 1.5);
  CHECK(j.at("model_flops_utilization").is_null());
  CHECK(j.at("bubble").at("simulated").is_null());  // known once the summary row comes
}
