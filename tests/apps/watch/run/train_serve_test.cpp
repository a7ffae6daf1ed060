// `conveyor train --serve`: the status of the run being trained, served from its own
// thread while the steps go on, and closed when a stop (SIGTERM) ends the run.
#include <doctest/doctest.h>

#include "tests/apps/train/train_test_support.hpp"
#include "tests/apps/watch/http_get.hpp"
#include "tests/apps/watch/run/served_job.hpp"

using namespace conveyor::testing;

TEST_CASE("train --serve serves the run's metrics while it trains and stops serving with the run") {
  TempDir dir;
  const std::string run = dir / "run";
  const std::string log = dir / "train.err";
  const pid_t pid = start_conveyor({"train", "configs/tiny.yaml", "--out", run, "--set", "train.eval_every=0",
                                    "--set", "pipeline.stages=2", "--serve", "0"},
                                   log);
  const auto port = wait_for_logged_port(log);
  if (port == 0) ::kill(pid, SIGKILL);
  REQUIRE(port != 0);
  // Some step rows first: the metrics then carry a step and the stages' busy shares.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (step_rows(fs::path(run) / "metrics.jsonl") < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto metrics = http_request(port, "/metrics");
  CHECK(metrics.status == 200);
  CHECK(metrics.body.find("\nconveyor_steps_planned 400\n") != std::string::npos);
  CHECK(metrics.body.find("conveyor_stage_busy_ratio{stage=\"1\",device=\"cpu\",node=\"0\"} ") !=
        std::string::npos);
  REQUIRE(::kill(pid, SIGTERM) == 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // a stop with a checkpoint
  CHECK_THROWS(http_request(port, "/metrics"));  // the server went with the run
  // The folder says how the run ended: stopped by the signal, with its checkpoint.
  const auto once = run_conveyor({"watch", run, "--format", "json"});
  REQUIRE(once.exit_code == 0);
  const auto after = nlohmann::json::parse(once.out);
  CHECK(after.at("state") == "stopped");
  CHECK(after.at("stop_reason") == "SIGTERM");
  CHECK(after.at("checkpoints").at("last").at("step") == after.at("step"));
}

TEST_CASE("train --serve with a bad value or beyond loopback without a token exits 2 before the run folder exists") {
  TempDir dir;
  ::unsetenv("CONVEYOR_SERVE_TOKEN");
  const auto r = run_conveyor({"train", "configs/tiny.yaml", "--out", dir / "run", "--serve", "0.0.0.0:0"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--serve 0.0.0.0:0: 0.0.0.0 is reachable from other machines") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "run"));
  // A supervised run too: its supervisor refuses the value before starting a child.
  const auto supervised = run_conveyor({"train", "configs/tiny.yaml", "--out", dir / "run", "--supervise", "--serve",
                                        "80x"});
  CHECK(supervised.exit_code == 2);
  CHECK(supervised.err.find("--serve '80x': the port must be a number from 0 to 65535") != std::string::npos);
  CHECK(supervised.err.find("conveyor train --supervise:") == std::string::npos);  // no child started
  CHECK_FALSE(fs::exists(dir / "run"));
}
