// `conveyor watch` on the folder of a real tiny training run: printed once as JSON, and
// served (port 0, the URL on stdout) until SIGTERM; bad --serve values exit 2 naming the
// flag and the value.
#include <doctest/doctest.h>

#include "tests/apps/train/train_test_support.hpp"
#include "tests/apps/watch/http_get.hpp"

using namespace conveyor::testing;

namespace {

// A port printed by `watch --serve 0 --format json` on its first stdout line; 0 if none
// came within 20 s.
std::uint16_t wait_for_port(const fs::path& out) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(out)) {
      const std::string text = read_text(out);
      if (const auto nl = text.find('\n'); nl != std::string::npos)
        return nlohmann::json::parse(text.substr(0, nl)).at("port").get<std::uint16_t>();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}

}  // namespace

TEST_CASE("conveyor watch reads and serves the folder of a finished tiny run") {
  TempDir dir;
  const std::string run = dir / "run";
  train_ok({"configs/tiny.yaml", "--out", run, "--set", "train.steps=4", "--set", "train.eval_every=2", "--set",
            "checkpoint.every=2", "--set", "pipeline.stages=2"});

  const auto once = run_conveyor({"watch", run, "--format", "json"});
  REQUIRE(once.exit_code == 0);
  const auto status = nlohmann::json::parse(once.out);
  CHECK(status.at("state") == "finished");
  CHECK(status.at("step") == 4);
  CHECK(status.at("steps") == 4);
  CHECK(status.at("eval_loss").is_number());
  CHECK(status.at("stages").size() == 2);
  CHECK(status.at("stages")[0].at("busy_ratio").is_number());
  CHECK(status.at("bubble").at("simulated").is_number());
  CHECK(status.at("checkpoints").at("count").get<int>() >= 1);
  CHECK(status.at("checkpoints").at("last").at("step") == 4);
  CHECK(status.at("rows").at("unknown") == 0);

  const std::string out = dir / "watch.out";
  const pid_t pid = start_conveyor({"watch", run, "--serve", "0", "--format", "json"}, dir / "watch.err", out);
  const auto port = wait_for_port(out);
  if (port == 0) ::kill(pid, SIGKILL);
  REQUIRE(port != 0);
  const auto metrics = http_request(port, "/metrics");
  CHECK(metrics.status == 200);
  CHECK(metrics.body.find("\nconveyor_step 4\n") != std::string::npos);
  CHECK(metrics.body.find("\nconveyor_run_finished 1\n") != std::string::npos);
  CHECK(metrics.body.find("\nconveyor_checkpoint_seconds ") != std::string::npos);
  CHECK(http_request(port, "/api/status").status == 200);
  REQUIRE(::kill(pid, SIGTERM) == 0);
  int wait_status = 0;
  REQUIRE(::waitpid(pid, &wait_status, 0) == pid);
  CHECK(WIFEXITED(wait_status));
  CHECK(WEXITSTATUS(wait_status) == 0);
  const std::string err = read_text(dir / "watch.err");
  CHECK(err.find("conveyor watch: serving " + run + " at http://127.0.0.1:" + std::to_string(port) + "/") !=
        std::string::npos);
}

TEST_CASE("conveyor watch refuses a bad --serve value and a folder that is no run, exit 2") {
  TempDir dir;
  const std::string run = dir.write("metrics.jsonl", "");
  const std::string folder = fs::path(run).parent_path().string();
  const auto bad = run_conveyor({"watch", folder, "--serve", "80x"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--serve '80x': the port must be a number") != std::string::npos);
  const auto none = run_conveyor({"watch", dir / "nothing"});
  CHECK(none.exit_code == 2);
  CHECK(none.err.find("RUN_DIR " + (dir / "nothing") + ": does not exist") != std::string::npos);
  const auto help = run_conveyor({"watch", "--help"});
  CHECK(help.exit_code == 0);
  CHECK(help.out.find("--serve") != std::string::npos);
}
