// /metrics of a live training job as Prometheus's own checker reads it: `promtool check
// metrics` (Debian's prometheus package) must find nothing, and every family issue 45
// names must be there with HELP and TYPE. Without promtool the test says
// "skipped: no promtool" and passes.
#include <doctest/doctest.h>

#include <iostream>

#include "tests/apps/support/run_command.hpp"
#include "tests/apps/watch/http_get.hpp"
#include "tests/apps/watch/run/served_job.hpp"
#include "tests/apps/watch/run/installed_tool.hpp"

using namespace conveyor::testing;

TEST_CASE("a live run's /metrics passes promtool check metrics and has every family the issue names") {
  CONVEYOR_REQUIRE_TOOL(promtool, "promtool", "prometheus", "/usr/bin/promtool");
  TempDir dir;
  // An evaluation and a checkpoint early, so that their families have samples too.
  ServedJob job(dir.path(), {"train.eval_every=5", "train.eval_batches=1", "checkpoint.every=5"});
  REQUIRE(job.port != 0);
  REQUIRE(job.wait_for_steps(8));
  std::string body;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  do {  // the checkpoint's write ends in the background
    const auto r = http_request(job.port, "/metrics");
    REQUIRE(r.status == 200);
    body = r.body;
  } while (body.find("\nconveyor_checkpoint_seconds ") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline);
  const fs::path file = dir / "metrics.txt";
  std::ofstream(file) << body;
  const auto check = run_command({"/bin/sh", "-c", promtool + " check metrics < '" + file.string() + "'"});
  INFO("metrics:\n" << body);
  INFO("promtool: " << check.out << check.err);
  CHECK(check.exit_code == 0);
  CHECK(check.out + check.err == "");  // no lint finding either
  const std::string lines = "\n" + body;  // every line after a newline, the first too
  for (const char* name : {"conveyor_step", "conveyor_loss", "conveyor_eval_loss", "conveyor_tokens_per_second",
                           "conveyor_model_flops_utilization", "conveyor_stage_busy_ratio", "conveyor_bubble_ratio",
                           "conveyor_recoveries_total", "conveyor_checkpoint_seconds"}) {
    CAPTURE(name);
    CHECK(lines.find(std::string("\n# HELP ") + name + " ") != std::string::npos);
    CHECK(lines.find(std::string("\n# TYPE ") + name + " ") != std::string::npos);
  }
  // Samples of a running CPU job: all but MFU (no known peak for a CPU).
  for (const char* sample : {"\nconveyor_step ", "\nconveyor_loss ", "\nconveyor_eval_loss ",
                             "\nconveyor_tokens_per_second ", "\nconveyor_bubble_ratio ",
                             "\nconveyor_stage_busy_ratio{stage=\"0\",device=\"cpu\",node=\"0\"} ",
                             "\nconveyor_recoveries_total{kind=\"crash\"} 0\n", "\nconveyor_checkpoint_seconds "}) {
    CAPTURE(sample);
    CHECK(body.find(sample) != std::string::npos);
  }
  const int status = job.stop();
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
