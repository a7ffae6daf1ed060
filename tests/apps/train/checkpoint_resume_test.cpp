// Checkpoints through the real `conveyor train`: a run resumed from its checkpoint ends
// bitwise identical to one that never stopped (also after SIGTERM), resumes into another
// stage count on the same loss curve, falls back past a corrupt shard (flipped by hand or
// by fault.inject), and a bad --resume changes nothing.
#include <doctest/doctest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "actors/checkpoint/filesystem.hpp"
#include "actors/checkpoint/layout.hpp"
#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor::testing;

namespace {

// The small job for 12 steps on 4 stages, with the extra overrides.
std::vector<std::string> job_args(const std::string& data, const std::string& out,
                                  std::vector<std::string> sets) {
  std::vector<std::string> args{source_path("configs/tiny.yaml")};
  for (const auto& a : small_job(data)) args.push_back(a);
  for (const auto& a : std::vector<std::string>{"--set", "train.steps=12", "--set", "pipeline.stages=4"})
    args.push_back(a);
  for (const auto& s : sets) args.insert(args.end(), {"--set", s});
  args.insert(args.end(), {"--out", out});
  return args;
}

std::vector<std::string> plus(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// step -> loss of every step row of a run's metrics.jsonl.
std::map<std::int64_t, double> losses(const fs::path& run) {
  std::map<std::int64_t, double> out;
  for (const auto& row : read_jsonl(run / "metrics.jsonl"))
    if (row.contains("step") && !row.contains("event")) out[row.at("step").get<std::int64_t>()] = row.at("loss").get<double>();
  return out;
}

std::string weights(const fs::path& run) { return read_text(run / "weights.safetensors"); }

void flip_byte(const fs::path& file, std::size_t offset) {
  std::string bytes = read_text(file);
  REQUIRE(offset < bytes.size());
  bytes[offset] = static_cast<char>(bytes[offset] ^ 0x40);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// One uninterrupted 12-step run with checkpoints every 4 steps, shared by the tests.
struct Reference {
  TempDir dir;
  std::string data = copy_english_text(dir);
  fs::path run = dir.path() / "full";
  CommandResult result;
  Reference() {
    result = train_ok(job_args(data, run.string(), {"checkpoint.every=4"}));
  }
};

}  // namespace

TEST_CASE("checkpoint.every writes keep-K complete checkpoints under DIR/checkpoints without changing the run") {
  Reference ref;
  for (const char* step : {"step-000004", "step-000008", "step-000012"}) {
    CAPTURE(step);
    CHECK(fs::exists(ref.run / "checkpoints" / step / "manifest.json"));
    for (int s = 0; s < 4; ++s)
      CHECK(fs::exists(ref.run / "checkpoints" / step / ("stage-" + std::to_string(s) + ".safetensors")));
  }
  const auto manifest = nlohmann::json::parse(read_text(ref.run / "checkpoints/step-000008/manifest.json"));
  CHECK(manifest.at("step") == 8);
  CHECK(manifest.at("stages") == 4);
  CHECK(manifest.at("schedule") == "1f1b");
  CHECK(manifest.at("seed") == 1234);
  CHECK(contains(manifest.at("config").get<std::string>(), "every: 4"));
  CHECK(contains(ref.result.err, "step 8 written to"));
  // Checkpointing does not touch the arithmetic: the same job without it, same bits.
  const fs::path plain = ref.dir.path() / "plain";
  train_ok(job_args(ref.data, plain.string(), {}));
  CHECK(weights(plain) == weights(ref.run));
  CHECK_FALSE(fs::exists(plain / "checkpoints"));
  // checkpoint.keep 2: only the two newest stay.
  const fs::path kept = ref.dir.path() / "kept";
  train_ok(job_args(ref.data, kept.string(), {"checkpoint.every=4", "checkpoint.keep=2"}));
  CHECK_FALSE(fs::exists(kept / "checkpoints/step-000004"));
  CHECK(fs::exists(kept / "checkpoints/step-000008/manifest.json"));
  CHECK(fs::exists(kept / "checkpoints/step-000012/manifest.json"));
}

TEST_CASE("a 12-step run resumed from its step-8 checkpoint ends bitwise identical, with identical loss rows") {
  Reference ref;
  const fs::path resumed = ref.dir.path() / "resumed";
  const auto r = train_ok(plus(job_args(ref.data, resumed.string(), {"checkpoint.every=4"}),
                               {"--resume", (ref.run / "checkpoints/step-000008").string()}));
  CHECK(contains(r.err, "resuming from " + (ref.run / "checkpoints/step-000008").string()));
  CHECK(weights(resumed) == weights(ref.run));
  const auto full = losses(ref.run), after = losses(resumed);
  REQUIRE(after.size() == 4);
  for (const auto& [step, loss] : after) {
    CAPTURE(step);
    CHECK(step >= 8);
    CHECK(loss == full.at(step));
  }
  const auto rows = read_jsonl(resumed / "metrics.jsonl");
  REQUIRE_FALSE(rows.empty());
  CHECK(rows.front().at("event") == "resume");
  CHECK(rows.front().at("after_step") == 8);
  CHECK_FALSE(rows.front().contains("step"));  // step rows only carry "step"
}

TEST_CASE("a checkpoint of 4 stages resumes into 2 stages on the same loss curve") {
  Reference ref;
  const fs::path two = ref.dir.path() / "two";
  train_ok(plus(job_args(ref.data, two.string(), {"pipeline.stages=2"}),
                {"--resume", (ref.run / "checkpoints/step-000004").string()}));
  const auto full = losses(ref.run), after = losses(two);
  REQUIRE(after.size() == 8);
  for (const auto& [step, loss] : after) {
    CAPTURE(step);
    CHECK(std::abs(loss - full.at(step)) <= 1e-5 * std::abs(full.at(step)));
  }
  const auto plan = nlohmann::json::parse(read_text(two / "plan.json"));
  CHECK(plan.at("placement").size() == 2);
}

TEST_CASE("a shard with one flipped byte is detected: the resume falls back to the previous checkpoint and says so") {
  Reference ref;
  const fs::path shard = ref.run / "checkpoints/step-000008/stage-1.safetensors";
  flip_byte(shard, fs::file_size(shard) / 2);
  const fs::path resumed = ref.dir.path() / "resumed";
  const auto r = train_ok(plus(job_args(ref.data, resumed.string(), {}),
                               {"--resume", (ref.run / "checkpoints/step-000008").string()}));
  CHECK(contains(r.err, "resuming from " + (ref.run / "checkpoints/step-000004").string()));
  CHECK(contains(r.err, "skipped a newer checkpoint that failed verification: " + shard.string()));
  CHECK(contains(r.err, "sha256"));
  CHECK(weights(resumed) == weights(ref.run));  // 8 steps from step 4 land on the same bits
  CHECK(losses(resumed).begin()->first == 4);
}

TEST_CASE("fault.inject corrupt-checkpoint:step=8 corrupts that checkpoint only, and a later resume falls back") {
  Reference ref;
  const fs::path faulty = ref.dir.path() / "faulty";
  train_ok(job_args(ref.data, faulty.string(),
                    {"checkpoint.every=4", "fault.inject=[corrupt-checkpoint:step=8]"}));
  CHECK(weights(faulty) == weights(ref.run));  // the run itself is unaffected
  const fs::path resumed = ref.dir.path() / "resumed";
  const auto r = train_ok(plus(job_args(ref.data, resumed.string(), {}),
                               {"--resume", (faulty / "checkpoints/step-000008").string()}));
  CHECK(contains(r.err, "resuming from " + (faulty / "checkpoints/step-000004").string()));
  CHECK(contains(r.err, (faulty / "checkpoints/step-000008/stage-0.safetensors").string() +
                            ": shard's sha256"));
  CHECK(weights(resumed) == weights(ref.run));
}

TEST_CASE("a bad --resume exits 2 with one error line naming it and writes nothing") {
  TempDir dir;
  const std::string data = copy_english_text(dir);
  const fs::path out = dir.path() / "run";
  struct Case {
    std::vector<std::string> extra;
    std::string message;
  };
  const fs::path empty = dir.path() / "empty";
  fs::create_directories(empty);
  for (const Case& c : std::vector<Case>{
           {{"--resume", (dir.path() / "missing").string()}, "--resume " + (dir.path() / "missing").string() + ": no such folder"},
           {{"--resume", "latest"}, "--resume latest: checkpoint.dir " + (out / "checkpoints").string() + " does not exist"},
           {{"--resume", empty.string()}, "not a checkpoint"},
       }) {
    CAPTURE(c.message);
    std::vector<std::string> args{"train"};
    for (const auto& a : plus(job_args(data, out.string(), {}), c.extra)) args.push_back(a);
    const auto r = run_conveyor(args);
    CHECK(r.exit_code == 2);
    CHECK(split_lines(r.err).size() == 1);
    CHECK(contains(r.err, c.message));
    CHECK_FALSE(fs::exists(out));
  }
  // --resume latest without --out has no run to continue.
  std::vector<std::string> args{"train", source_path("configs/tiny.yaml"), "--set",
                                "data.path=" + data, "--resume", "latest"};
  const auto r = run_conveyor(args, 60, dir.path().string());
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--resume latest: give --out"));
  CHECK_FALSE(fs::exists(dir.path() / "runs"));
}

TEST_CASE("a resume that does not fit the run is refused naming the key") {
  Reference ref;
  const fs::path out = ref.dir.path() / "other";
  const std::string step4 = (ref.run / "checkpoints/step-000004").string();
  auto refused = [&](std::vector<std::string> sets, const std::string& message) {
    std::vector<std::string> args{"train"};
    for (const auto& a : plus(job_args(ref.data, out.string(), sets), {"--resume", step4})) args.push_back(a);
    const auto r = run_conveyor(args);
    CAPTURE(message);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, message));
    CHECK_FALSE(fs::exists(out));
  };
  refused({"train.seed=99"}, "train.seed is 99, the checkpoint was written with 1234");
  refused({"train.steps=4"}, "train.steps is 4, the checkpoint already has 4 steps");
  // The manifest's config names the model: keys that change no tensor's shape count too.
  refused({"model.d_model=64"}, "the checkpoint holds another model: model.d_model");
  refused({"model.heads=4"}, "the checkpoint holds another model: model.heads 2 (checkpoint) vs 4 (this run)");
  refused({"model.tie_embeddings=true"},
          "the checkpoint holds another model: model.tie_embeddings false (checkpoint) vs true (this run)");
}

TEST_CASE("a checkpoint.dir that cannot be created exits 2 naming the key, before the run folder exists") {
  TempDir dir;
  const std::string data = copy_english_text(dir);
  const std::string file = dir.write("a-file", "x");
  const fs::path out = dir.path() / "run";
  // checkpoint.every 0 too: SIGTERM still writes a checkpoint there, so it must exist.
  for (const char* every : {"checkpoint.every=2", "checkpoint.every=0"}) {
    CAPTURE(every);
    std::vector<std::string> args{"train"};
    for (const auto& a : job_args(data, out.string(), {every, "checkpoint.dir=" + file + "/ck"})) args.push_back(a);
    const auto r = run_conveyor(args);
    CHECK(r.exit_code == 2);
    CHECK(split_lines(r.err).size() == 1);
    CHECK(contains(r.err, "checkpoint.dir: cannot create " + file + "/ck"));
    CHECK_FALSE(fs::exists(out));
  }
}

TEST_CASE("--resume into a folder holding another run is refused, into the checkpoint's own run it continues") {
  Reference ref;
  const std::string step4 = (ref.run / "checkpoints/step-000004").string();
  // Another run's folder: its metrics and weights must stay as they are.
  TempDir other_dir;
  const fs::path other = other_dir.path() / "other";
  train_ok(job_args(ref.data, other.string(), {"train.steps=2"}));
  const std::string metrics_before = read_text(other / "metrics.jsonl");
  std::vector<std::string> args{"train"};
  for (const auto& a : plus(job_args(ref.data, other.string(), {}), {"--resume", step4})) args.push_back(a);
  const auto r = run_conveyor(args);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--out " + other.string() + ": already holds another run (metrics.jsonl), and --resume " +
                            step4 + " is not one of its checkpoints"));
  CHECK(read_text(other / "metrics.jsonl") == metrics_before);
  // A checkpoint.dir outside the run is its own when the run's config.yaml names it.
  TempDir own_dir;
  const fs::path own = own_dir.path() / "own";
  const std::string ckdir = (own_dir.path() / "ck").string();
  train_ok(job_args(ref.data, own.string(), {"checkpoint.every=2", "train.steps=4", "checkpoint.dir=" + ckdir}));
  std::vector<std::string> cont{"train"};
  for (const auto& a : plus(job_args(ref.data, own.string(), {"train.steps=6", "checkpoint.dir=" + ckdir}),
                            {"--resume", ckdir + "/step-000004"}))
    cont.push_back(a);
  const auto ok = run_conveyor(cont);
  INFO(ok.err);
  CHECK(ok.exit_code == 0);
}

TEST_CASE("checkpoint.every with --nnodes 2 but no snapshot at its steps is refused naming the keys, before any rendezvous") {
  TempDir dir;
  const std::string data = copy_english_text(dir);
  const fs::path out = dir.path() / "run";
  for (const std::string snapshots : {"fault.snapshot_every=3", "fault.snapshot_every=0"}) {
    std::vector<std::string> args{"train"};
    for (const auto& a : plus(job_args(data, out.string(), {"checkpoint.every=2", snapshots}),
                              {"--nnodes", "2", "--node-rank", "0", "--rdzv", "127.0.0.1:1"}))
      args.push_back(a);
    const auto r = run_conveyor(args);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "checkpoint.every: 2 with nnodes 2"));
    CHECK(contains(r.err, "fault.snapshot_every must be > 0"));
    CHECK_FALSE(fs::exists(out));
  }
}


TEST_CASE("SIGTERM mid-run writes a checkpoint, prints the resume command and exits 0, resuming ends bitwise identical") {
  TempDir dir;
  const std::string data = copy_english_text(dir);
  const std::vector<std::string> sets{"train.steps=40"};
  const fs::path full = dir.path() / "full", run = dir.path() / "run";
  train_ok(job_args(data, full.string(), sets), 120);

  std::vector<std::string> args{"train"};
  for (const auto& a : job_args(data, run.string(), sets)) args.push_back(a);
  args.insert(args.end(), {"--format", "json"});
  const std::string log = dir / "stderr.txt", out = dir / "stdout.txt";
  const pid_t pid = start_conveyor(args, log, out);
  const int status = terminate_after_steps(pid, run / "metrics.jsonl", 3);
  const std::string err = read_text(log);
  INFO("stderr: " << err);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(contains(err, "SIGTERM: stopped after step"));
  CHECK(contains(err, "--out " + run.string() + " --resume latest"));
  CHECK_FALSE(fs::exists(run / "weights.safetensors"));
  const auto rows = read_jsonl(run / "metrics.jsonl");
  REQUIRE_FALSE(rows.empty());
  CHECK(rows.back().at("event") == "stopped");
  const auto stopped = rows.back().at("after_step").get<std::int64_t>();
  CHECK(stopped < 40);
  CHECK(fs::exists(run / "checkpoints" / ("step-" + std::string(6 - std::to_string(stopped).size(), '0') +
                                          std::to_string(stopped)) / "manifest.json"));
  // --format json: stdout is that one row alone, so a script sees the early end.
  const std::string json = read_text(out);
  CHECK(std::count(json.begin(), json.end(), '\n') == 1);
  CHECK(nlohmann::json::parse(json) == rows.back());

  // What the message says to run, in the same folder.
  train_ok(plus(job_args(data, run.string(), sets), {"--resume", "latest"}), 120);
  CHECK(weights(run) == weights(full));
  const auto before = losses(full), after = losses(run);
  CHECK(after == before);  // every step once: the stopped run's rows, then the resumed ones
}

TEST_CASE("SIGTERM during a long evaluation stops within a wave at the boundary before it, the resumed run evaluates first and ends bitwise identical") {
  TempDir dir;
  const std::string data = copy_english_text(dir);
  const std::vector<std::string> sets{"train.steps=6", "train.eval_every=2", "train.eval_batches=8"};
  const fs::path full = dir.path() / "full", run = dir.path() / "run";
  train_ok(job_args(data, full.string(), sets), 120);

  // 65536 eval micro-batches take minutes here: the stop must not wait for them.
  std::vector<std::string> args{"train"};
  for (const auto& a : job_args(data, run.string(), {"train.steps=6", "train.eval_every=2",
                                                     "train.eval_batches=65536"}))
    args.push_back(a);
  const std::string log = dir / "stderr.txt";
  const pid_t pid = start_conveyor(args, log);
  const auto start = std::chrono::steady_clock::now();
  const int status = terminate_after_steps(pid, run / "metrics.jsonl", 2);  // eval after step 1 runs
  const double stop_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO("stderr: " << read_text(log));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(stop_s < 30);
  const auto rows = read_jsonl(run / "metrics.jsonl");
  REQUIRE_FALSE(rows.empty());
  CHECK(rows.back().at("event") == "stopped");
  CHECK(rows.back().at("after_step") == 2);
  for (const auto& row : rows) CHECK(row.value("event", "") != "eval");  // dropped, not half-logged

  train_ok(plus(job_args(data, run.string(), sets), {"--resume", "latest"}), 120);
  CHECK(weights(run) == weights(full));
  auto evals = [](const fs::path& r) {
    std::vector<std::pair<std::int64_t, double>> out;
    for (const auto& row : read_jsonl(r / "metrics.jsonl"))
      if (row.value("event", "") == "eval")
        out.emplace_back(row.at("after_step").get<std::int64_t>(), row.at("val_loss").get<double>());
    return out;
  };
  CHECK(evals(run) == evals(full));  // the dropped evaluation ran first on resume
  CHECK(losses(run) == losses(full));
}

TEST_CASE("SIGTERM during the only evaluation, the one after the last step: the weights are written and final_val_loss is null") {
  TempDir dir;
  const std::string data = copy_english_text(dir);
  const fs::path run = dir.path() / "run";
  std::vector<std::string> args{"train"};
  for (const auto& a : job_args(data, run.string(), {"train.steps=3", "train.eval_every=0",
                                                     "train.eval_batches=65536"}))
    args.push_back(a);
  const std::string log = dir / "stderr.txt";
  const int status = terminate_after_steps(start_conveyor(args, log), run / "metrics.jsonl", 3);
  const std::string err = read_text(log);
  INFO("stderr: " << err);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(contains(err, "SIGTERM during the evaluation after the last step: it was dropped (no evaluation "
                      "before it in this run: final_val_loss is null)"));
  CHECK(contains(err, "val_loss n/a"));
  CHECK(fs::file_size(run / "weights.safetensors") > 0);
  const auto rows = read_jsonl(run / "metrics.jsonl");
  REQUIRE_FALSE(rows.empty());
  CHECK(rows.back().at("event") == "summary");
  CHECK(rows.back().at("final_val_loss").is_null());  // was 0.0: a loss no model reaches
}

TEST_CASE("Ctrl-C stops like SIGTERM with a checkpoint (reason SIGINT), a second Ctrl-C exits at once") {
  TempDir dir;
  const std::string data = copy_english_text(dir);
  {
    const fs::path run = dir.path() / "once";
    std::vector<std::string> args{"train"};
    for (const auto& a : job_args(data, run.string(), {"train.steps=40"})) args.push_back(a);
    const std::string log = dir / "once.txt";
    const int status = terminate_after_steps(start_conveyor(args, log), run / "metrics.jsonl", 3, SIGINT);
    const std::string err = read_text(log);
    INFO("stderr: " << err);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(contains(err, "Ctrl-C again exits at once"));
    CHECK(contains(err, "SIGINT: stopped after step"));
    const auto rows = read_jsonl(run / "metrics.jsonl");
    REQUIRE_FALSE(rows.empty());
    CHECK(rows.back().at("event") == "stopped");
    CHECK(rows.back().at("reason") == "SIGINT");
    CHECK(fs::exists(rows.back().at("checkpoint").get<std::string>()));
  }
  {
    // Step 3 takes seconds (stage 0 sleeps in each action): both Ctrl-Cs land inside it.
    const fs::path run = dir.path() / "twice";
    std::vector<std::string> args{"train"};
    for (const auto& a : job_args(data, run.string(), {"train.steps=40", "fault.inject=[slow:stage=0:ms=500:step=3]"}))
      args.push_back(a);
    const std::string log = dir / "twice.txt";
    const pid_t pid = start_conveyor(args, log);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (step_rows(run / "metrics.jsonl") < 3 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    REQUIRE(::kill(pid, SIGINT) == 0);
    deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!contains(read_text(log), "Ctrl-C again") && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    REQUIRE(::kill(pid, SIGINT) == 0);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    INFO("stderr: " << read_text(log));
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGINT);
    // It did not wait for the boundary: no checkpoint (the folder itself is made at start).
    CHECK(conveyor::checkpoint::list_checkpoints(conveyor::checkpoint::posix_filesystem(),
                                                 (run / "checkpoints").string())
              .empty());
  }
}

TEST_CASE("--resume refuses another run's checkpoint naming both and what differs, unless --force") {
  Reference ref;
  const std::string step4 = (ref.run / "checkpoints/step-000004").string();
  // Another learning rate and seed: another run (two runs that shared a checkpoint.dir).
  const fs::path other = ref.dir.path() / "other";
  const auto refused = run_conveyor(plus({"train"}, plus(job_args(ref.data, other.string(), {"train.lr=0.001"}), {"--resume", step4})));
  CHECK(refused.exit_code == 2);
  INFO(refused.err);
  CHECK(contains(refused.err, "--resume " + step4 + ": the checkpoint was written by another run than --out " +
                                  other.string()));
  CHECK(contains(refused.err, "train.lr 0.003 (checkpoint) vs 0.001 (this run)"));
  CHECK(contains(refused.err, "add --force"));
  CHECK_FALSE(fs::exists(other));
  // The layout may change (resharding gives the same bits), and train.steps: the same run.
  const auto same_run = run_conveyor(plus({"train"}, plus(job_args(ref.data, (ref.dir.path() / "two").string(),
                                                   {"pipeline.stages=2", "train.steps=13"}),
                                          {"--resume", step4})));
  CHECK(same_run.exit_code == 0);
  // --force: continued with this config.
  const auto forced =
      run_conveyor(plus({"train"}, plus(job_args(ref.data, other.string(), {"train.lr=0.001"}), {"--resume", step4, "--force"})));
  CHECK(forced.exit_code == 0);
  CHECK(fs::exists(other / "weights.safetensors"));
  // --force means nothing without --resume.
  const auto alone = run_conveyor(plus({"train"}, plus(job_args(ref.data, (ref.dir.path() / "alone").string(), {}), {"--force"})));
  CHECK(alone.exit_code == 2);
}
