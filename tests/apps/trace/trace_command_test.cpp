// End-to-end tests of `conveyor trace`: a traced training run analysed by every
// subcommand, and bad input (missing, corrupt, truncated traces; unknown flags).
#include <doctest/doctest.h>

#include <set>

#include "tests/apps/train/train_test_support.hpp"

namespace conveyor::testing {
namespace {

// One traced run shared by the tests below (a few seconds of training).
const fs::path& traced_run() {
  static TempDir dir;
  static const fs::path run = [] {
    const auto out = dir / "run";
    auto args = small_job(copy_english_text(dir));
    args.insert(args.end(), {"--out", out, "--set", "trace.enabled=true", "--set", "trace.steps=2-5"});
    train_ok(args, 120);
    return fs::path(out);
  }();
  return run;
}

void require_one_error_line(const CommandResult& r, const std::string& text) {
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  const auto lines = split_lines(r.err);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].rfind("error: ", 0) == 0);
  CHECK(lines[0].find(text) != std::string::npos);
  CHECK(r.out.empty());
}

}  // namespace

TEST_CASE("conveyor trace and each of its subcommands answer --help") {
  for (const char* sub : {"", "export", "summary", "check", "draw"}) {
    std::vector<std::string> args{"trace"};
    if (*sub) args.push_back(sub);
    args.push_back("--help");
    const auto r = run_conveyor(args);
    INFO(sub);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("Usage") != std::string::npos);
  }
}

TEST_CASE("conveyor trace refuses a missing folder, unknown flags and a folder without a trace") {
  TempDir dir;
  require_one_error_line(run_conveyor({"trace", "summary", dir / "nope"}), "no such folder");
  require_one_error_line(run_conveyor({"trace", "check", dir.path().string()}), "no trace files");
  require_one_error_line(run_conveyor({"trace", "summary", dir.path().string(), "--frobnicate"}),
                         "--frobnicate");
  require_one_error_line(run_conveyor({"trace", "export", dir.path().string()}), "--chrome");
}

TEST_CASE("conveyor trace refuses corrupt, truncated and wrong-version trace files") {
  TempDir dir;
  fs::create_directories(dir.path() / "trace");
  const std::string good = read_text(traced_run() / "trace" / "process-0.ctrace");
  dir.write("trace/process-0.ctrace", "this is not a trace at all, not even close.......");
  require_one_error_line(run_conveyor({"trace", "summary", dir.path().string()}), "wrong magic");
  dir.write("trace/process-0.ctrace", good.substr(0, good.size() - 7));
  require_one_error_line(run_conveyor({"trace", "check", dir.path().string()}), "truncated");
  std::string future = good;
  future[8] = 2;  // version 2
  dir.write("trace/process-0.ctrace", future);
  require_one_error_line(run_conveyor({"trace", "draw", dir.path().string(), "--out", dir / "t.svg"}),
                         "version 2 is not supported");
  CHECK_FALSE(fs::exists(dir / "t.svg"));
  // A header alone: no records, nothing to check (not "ok: 0 findings").
  dir.write("trace/process-0.ctrace", good.substr(0, 40));
  require_one_error_line(run_conveyor({"trace", "check", dir.path().string()}), "hold no records");
}

TEST_CASE("conveyor trace writes no output over the trace's own files or over a device") {
  TempDir dir;
  fs::copy(traced_run() / "trace", dir / "trace", fs::copy_options::recursive);
  const std::string trace_file = dir / "trace/process-0.ctrace";
  const std::string before = read_text(trace_file);
  require_one_error_line(run_conveyor({"trace", "export", dir.path().string(), "--chrome", trace_file}),
                         "is one of the trace's own files");
  require_one_error_line(
      run_conveyor({"trace", "draw", dir.path().string(), "--out", dir / "trace/schedule.json"}),
      "is one of the trace's own files (schedule.json)");
  require_one_error_line(run_conveyor({"trace", "export", dir.path().string(), "--chrome", dir / "new.ctrace"}),
                         "would be read as a trace file");
  CHECK(read_text(trace_file) == before);
  CHECK_FALSE(fs::exists(dir / "new.ctrace"));
  // The atomic write renames over its target: a device must not become a regular file.
  require_one_error_line(run_conveyor({"trace", "export", dir.path().string(), "--chrome", "/dev/null"}),
                         "/dev/null: exists and is not a regular file");
  CHECK(fs::is_character_file("/dev/null"));
  // schedule.json naming more replicas than 16-bit stage ids can hold.
  auto plans = nlohmann::json::parse(read_text(dir / "trace/schedule.json"));
  plans["replicas"] = 1000000000;
  dir.write("trace/schedule.json", plans.dump());
  require_one_error_line(run_conveyor({"trace", "summary", dir.path().string()}),
                         "\"replicas\" must be an integer in [1, 8192]");
}

TEST_CASE("train refuses bad trace and watchdog settings, naming key and value") {
  const auto steps = run_conveyor({"train", "--set", "trace.steps=20-10"});
  CHECK(steps.exit_code == 2);
  CHECK(steps.err.find("trace.steps") != std::string::npos);
  CHECK(steps.err.find("20-10") != std::string::npos);
  const auto timeout = run_conveyor({"train", "--set", "watchdog.timeout_s=-1"});
  CHECK(timeout.exit_code == 2);
  CHECK(timeout.err.find("watchdog.timeout_s") != std::string::npos);
  CHECK(timeout.err.find("-1") != std::string::npos);
}

TEST_CASE("a traced run exports, summarises, checks clean and draws") {
  const auto run = traced_run();
  CHECK(fs::exists(run / "trace" / "schedule.json"));
  TempDir out;
  const auto exported = run_conveyor({"trace", "export", run.string(), "--chrome", out / "t.json"});
  INFO(exported.err);
  REQUIRE(exported.exit_code == 0);
  const auto chrome = nlohmann::json::parse(read_text(out / "t.json"));
  std::size_t actions = 0;
  for (const auto& e : chrome["traceEvents"])
    if (e["ph"] == "X" && e["cat"] == "action" && !e["args"].contains("phase")) ++actions;
  CHECK(actions == 4 * 4 * 2 * 4);  // steps 2-5 × 4 stages × (F + B) × 4 micro-batches

  const auto summary = run_conveyor({"trace", "summary", run.string(), "--format", "json"});
  REQUIRE(summary.exit_code == 0);
  const auto s = nlohmann::json::parse(summary.out);
  CHECK(s["steps"] == 4);
  CHECK(s["per_stage"].size() == 4);
  CHECK(s["simulated_bubble"].is_number());
  CHECK(s["critical_path"]["actions"].get<std::string>().rfind("0F0", 0) == 0);

  const auto check = run_conveyor({"trace", "check", run.string()});
  INFO(check.out);
  CHECK(check.exit_code == 0);
  CHECK(check.out.find("ok: 5 rounds") == 0);  // 4 train rounds and the final evaluation

  const auto draw = run_conveyor({"trace", "draw", run.string(), "--out", out / "t.svg"});
  REQUIRE(draw.exit_code == 0);
  const auto svg = read_text(out / "t.svg");
  CHECK(svg.rfind("<svg", 0) == 0);
  for (const auto& e : fs::directory_iterator(out.path()))  // no temporary file left
    CHECK(e.path().filename().string().find(".tmp") == std::string::npos);
}

TEST_CASE("a traced run of 2 replicas x 2 stages checks clean, summary and export show both pipelines") {
  TempDir dir;
  const auto run = dir / "run";
  train_ok({"configs/tiny.yaml", "--out", run, "--set", "parallel.data=2", "--set",
            "pipeline.stages=2", "--set", "train.steps=3", "--set", "train.eval_every=0",
            "--set", "trace.enabled=true"},
           120);
  const auto check = run_conveyor({"trace", "check", run});
  INFO(check.out);
  CHECK(check.exit_code == 0);
  CHECK(check.out.find("ok: 4 rounds") == 0);  // 3 train rounds and the final evaluation

  const auto summary = run_conveyor({"trace", "summary", run, "--format", "json"});
  REQUIRE(summary.exit_code == 0);
  const auto s = nlohmann::json::parse(summary.out);
  CHECK(s["stages"] == 4);
  CHECK(s["replicas"] == 2);
  REQUIRE(s["per_stage"].size() == 4);
  for (const auto& row : s["per_stage"]) {
    CAPTURE(row.dump());
    CHECK(row["busy_ms"].get<double>() > 0);
    CHECK(row["messages"] == 3 * 4);  // 3 steps × 4 micro-batches of the replica's share
    CHECK(row["simulated_bubble_fraction"].is_number());
  }
  const auto text = run_conveyor({"trace", "summary", run});
  CHECK(text.out.find("4 stage actors (2 replicas × 2 stages") != std::string::npos);

  TempDir out;
  REQUIRE(run_conveyor({"trace", "export", run, "--chrome", out / "t.json"}).exit_code == 0);
  const auto chrome = nlohmann::json::parse(read_text(out / "t.json"));
  std::set<std::string> tracks;
  for (const auto& e : chrome["traceEvents"])
    if (e["name"] == "thread_name") tracks.insert(e["args"]["name"].get<std::string>());
  CHECK(tracks.count("stage 3 compute (replica 1, rank 1)") == 1);
  CHECK(tracks.count("stage 0 compute (replica 0, rank 0)") == 1);
}

TEST_CASE("trace check lists what is wrong and exits 1 on a trace that lost a receive") {
  const auto run = traced_run();
  TempDir dir;
  fs::create_directories(dir.path() / "trace");
  fs::copy_file(run / "trace" / "schedule.json", dir.path() / "trace" / "schedule.json");
  // Keep the header and the first 40 records only: the rest of the run is missing, so
  // sends lose their receives.
  const std::string bytes = read_text(run / "trace" / "process-0.ctrace");
  const std::size_t header = 32 + ((static_cast<unsigned char>(bytes[28]) + 7) / 8) * 8;
  dir.write("trace/process-0.ctrace", bytes.substr(0, header + 64 * 40));
  const auto r = run_conveyor({"trace", "check", dir.path().string()});
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("FAILED") != std::string::npos);
  CHECK(r.out.find("unmatched_send: ") != std::string::npos);
}

TEST_CASE("trace export --chrome - and draw --out - write to standard output, no file named '-'") {
  TempDir dir;
  const auto run = dir / "run";
  train_ok({"configs/tiny.yaml", "--out", run, "--set", "train.steps=2", "--set", "train.eval_every=0", "--set",
            "trace.enabled=true"});
  const auto exported = run_conveyor({"trace", "export", run, "--chrome", "-"}, 60, dir.path().string());
  REQUIRE(exported.exit_code == 0);
  CHECK(nlohmann::json::parse(exported.out).contains("traceEvents"));
  const auto drawn = run_conveyor({"trace", "draw", run, "--out", "-"}, 60, dir.path().string());
  REQUIRE(drawn.exit_code == 0);
  CHECK(drawn.out.rfind("<svg", 0) == 0);
  CHECK_FALSE(fs::exists(dir.path() / "-"));
}

}  // namespace conveyor::testing
