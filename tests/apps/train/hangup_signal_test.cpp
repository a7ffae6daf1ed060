// SIGHUP, the hang-up of the terminal or ssh session a run was started from, stops a run
// as SIGTERM does (docs/CHECKPOINTS.md): the step in progress ends, a checkpoint is
// written, the stopped row says "SIGHUP", exit 0. UCX, which every `conveyor` links,
// takes SIGHUP as its debug signal when it loads (UCX_DEBUG_SIGNO): its handler raised a
// log level and returned, so a hang-up left the run training. It stays UCX's where the
// user asked for that (UCX_DEBUG_SIGNO set), and ignored under nohup.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdlib>

#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor::testing;

namespace {

// The small job for `steps` steps into `out`: long enough to be signalled after step 3.
std::vector<std::string> job(const std::string& data, const fs::path& out, int steps) {
  std::vector<std::string> args{"train", source_path("configs/tiny.yaml")};
  for (const auto& a : small_job(data)) args.push_back(a);
  args.insert(args.end(), {"--set", "train.steps=" + std::to_string(steps), "--out", out.string()});
  return args;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A run that SIGHUP did not stop: it trained every step and wrote its weights.
void require_ran_to_the_end(const fs::path& run, int status, const std::string& err) {
  INFO("stderr: " << err);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(fs::file_size(run / "weights.safetensors") > 0);
  const auto rows = read_jsonl(run / "metrics.jsonl");
  REQUIRE_FALSE(rows.empty());
  CHECK(rows.back().at("event") == "summary");
}

}  // namespace

TEST_CASE("SIGHUP stops a run as SIGTERM does: a checkpoint, a stopped row with reason SIGHUP, exit 0") {
  TempDir dir;
  const std::string data = copy_english_text(dir);
  const fs::path run = dir.path() / "run";
  const std::string log = dir / "stderr.txt";
  // Before: the run trained all 400 steps and wrote its weights, the hang-up unseen.
  const int status = terminate_after_steps(start_conveyor(job(data, run, 400), log), run / "metrics.jsonl", 3, SIGHUP);
  const std::string err = read_text(log);
  INFO("stderr: " << err);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(contains(err, "SIGHUP: stopped after step"));
  CHECK(contains(err, "--out " + run.string() + " --resume latest"));
  CHECK_FALSE(fs::exists(run / "weights.safetensors"));
  const auto rows = read_jsonl(run / "metrics.jsonl");
  REQUIRE_FALSE(rows.empty());
  CHECK(rows.back().at("event") == "stopped");
  CHECK(rows.back().at("reason") == "SIGHUP");
  CHECK(rows.back().at("after_step").get<std::int64_t>() < 400);
  CHECK(fs::exists(fs::path(rows.back().at("checkpoint").get<std::string>()) / "manifest.json"));
}

TEST_CASE("SIGHUP under nohup stays ignored: the run trains to its end") {
  TempDir dir;
  const std::string data = copy_english_text(dir);
  const fs::path run = dir.path() / "run";
  const std::string log = dir / "stderr.txt";
  const pid_t pid = start_conveyor(job(data, run, 30), log, "/dev/null", {"nohup"});
  require_ran_to_the_end(run, terminate_after_steps(pid, run / "metrics.jsonl", 3, SIGHUP), read_text(log));
}

TEST_CASE("SIGHUP stays UCX's debug signal where the user set UCX_DEBUG_SIGNO to it: the run trains to its end") {
  TempDir dir;
  const std::string data = copy_english_text(dir);
  const fs::path run = dir.path() / "run";
  const std::string log = dir / "stderr.txt";
  ::setenv("UCX_DEBUG_SIGNO", "SIGHUP", 1);
  const pid_t pid = start_conveyor(job(data, run, 30), log);
  ::unsetenv("UCX_DEBUG_SIGNO");
  require_ran_to_the_end(run, terminate_after_steps(pid, run / "metrics.jsonl", 3, SIGHUP), read_text(log));
}
