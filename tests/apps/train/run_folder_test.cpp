// What `conveyor train --out DIR` leaves in DIR, read the way a user or a script reads it:
// config.yaml (the resolved config, loadable again), plan.json (schedule and placement),
// metrics.jsonl (step rows and event rows), weights.safetensors (the whole model under
// stage-independent names); and what it prints on stdout with --format json.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "apps/config/config_loader.hpp"
#include "kernels/io/safetensors.hpp"
#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

// The small job on 2 stages with 1F1B, evaluating every 3 of its 6 steps. With 2 stages
// the second one holds blocks whose global index is not their index on the stage, so
// stage-local names would show in the weights.
struct SmallRun {
  TempDir dir;
  std::string config = source_path("configs/tiny.yaml");
  std::vector<std::string> sets;
  fs::path out = dir.path() / "run";
  CommandResult result;

  explicit SmallRun(std::vector<std::string> extra = {}) {
    std::vector<std::string> args{config};
    for (const auto& a : small_job(copy_english_text(dir))) args.push_back(a);
    for (const auto& a : std::vector<std::string>{"--set", "pipeline.stages=2", "--set",
                                                  "pipeline.schedule=1f1b", "--set",
                                                  "train.eval_every=3"})
      args.push_back(a);
    for (std::size_t i = 1; i < args.size(); i += 2) sets.push_back(args[i + 1]);
    args.insert(args.end(), {"--out", out.string()});
    args.insert(args.end(), extra.begin(), extra.end());
    result = train_ok(args);
  }
};

bool finite_number(const nlohmann::json& v) {
  return v.is_number() && std::isfinite(v.get<double>());
}

}  // namespace

TEST_CASE("config.yaml in the run folder loads back to the resolved config") {
  SmallRun run;
  const RunConfig resolved = load_run_config(run.config, run.sets);
  const fs::path saved = run.out / "config.yaml";
  REQUIRE(fs::exists(saved));
  CHECK(read_text(saved) == to_yaml(resolved));
  CHECK(to_yaml(load_run_config(saved.string())) == to_yaml(resolved));
  CHECK(resolved.pipeline.stages == 2);  // the overrides are in it, not only the file
  CHECK(resolved.model.d_model == 32);
}

TEST_CASE("plan.json holds the schedule and one placement entry per stage with device, replica and layers") {
  SmallRun run;
  const auto plan = nlohmann::json::parse(read_text(run.out / "plan.json"));
  CHECK(plan.at("schedule") == "1f1b");
  const auto& placement = plan.at("placement");
  REQUIRE(placement.is_array());
  REQUIRE(placement.size() == 2);
  std::vector<std::string> layers;  // over all stages, in stage order
  for (std::size_t s = 0; s < placement.size(); ++s) {
    CAPTURE(s);
    const auto& stage = placement[s];
    CHECK(stage.at("device") == "cpu");
    CHECK(stage.at("replica") == 0);
    REQUIRE(stage.at("layers").is_array());
    CHECK_FALSE(stage.at("layers").empty());
    for (const auto& name : stage.at("layers")) layers.push_back(name.get<std::string>());
  }
  CHECK(layers == std::vector<std::string>{"embedding", "block 0", "block 1", "block 2",
                                           "block 3", "head"});
}

TEST_CASE("metrics.jsonl has one row per step and event rows marked by their event") {
  SmallRun run;
  const auto rows = read_jsonl(run.out / "metrics.jsonl");
  std::int64_t next_step = 0;
  int evals = 0, summaries = 0;
  for (const auto& row : rows) {
    INFO("row: " << row.dump());
    REQUIRE(row.is_object());
    if (!row.contains("event")) {  // a step row; event rows may name a step too
      CHECK(row.at("step") == next_step++);
      CHECK(finite_number(row.at("loss")));
      CHECK(row.at("loss").get<double>() > 0);
      CHECK(finite_number(row.at("tokens_per_s")));
      CHECK(row.at("tokens_per_s").get<double>() > 0);
      CHECK(finite_number(row.at("step_ms")));
      CHECK(row.at("step_ms").get<double>() > 0);
    } else {
      REQUIRE(row.contains("event"));
      CHECK(row.at("event").is_string());
      if (row.at("event") == "eval") {
        ++evals;
        CHECK(finite_number(row.at("val_loss")));
      }
      if (row.at("event") == "summary") {
        ++summaries;
        CHECK(&row == &rows.back());  // the summary is the last row
      }
    }
  }
  CHECK(next_step == 6);
  CHECK(evals >= 2);  // after steps 3 and 6
  CHECK(summaries == 1);
}

TEST_CASE("weights.safetensors holds the whole model under stage-independent names with the right shapes") {
  SmallRun run;
  const auto contents = read_safetensors_with_metadata((run.out / "weights.safetensors").string());
  std::map<std::string, Shape> got;
  for (const auto& t : contents.tensors) {
    CAPTURE(t.name);
    CHECK(t.tensor.dtype() == DType::f32);
    bool finite = true;
    for (float v : t.tensor.f32_span()) finite = finite && std::isfinite(v);
    CHECK(finite);
    got.emplace(t.name, t.tensor.shape());
  }

  const std::int64_t d = 32, vocab = 256, seq_len = 64;
  std::map<std::string, Shape> want{{"wte.weight", {vocab, d}},
                                    {"wpe.weight", {seq_len, d}},
                                    {"ln_f.weight", {d}},
                                    {"ln_f.bias", {d}},
                                    {"lm_head.weight", {vocab, d}}};
  for (int b = 0; b < 4; ++b) {
    const std::string p = "blocks." + std::to_string(b) + ".";
    want.insert({{p + "ln1.weight", {d}},
                 {p + "ln1.bias", {d}},
                 {p + "attn.qkv.weight", {3 * d, d}},
                 {p + "attn.qkv.bias", {3 * d}},
                 {p + "attn.proj.weight", {d, d}},
                 {p + "attn.proj.bias", {d}},
                 {p + "ln2.weight", {d}},
                 {p + "ln2.bias", {d}},
                 {p + "mlp.fc1.weight", {4 * d, d}},
                 {p + "mlp.fc1.bias", {4 * d}},
                 {p + "mlp.fc2.weight", {d, 4 * d}},
                 {p + "mlp.fc2.bias", {d}}});
  }
  CHECK(contents.tensors.size() == got.size());  // no name twice
  for (const auto& [name, shape] : want) {
    CAPTURE(name);
    REQUIRE(got.count(name) == 1);
    CHECK(got.at(name).str() == shape.str());
  }
  for (const auto& [name, shape] : got) {
    CAPTURE(name);
    CHECK(want.count(name) == 1);  // nothing else, e.g. no stage-local "blocks.0" copies
  }
}

TEST_CASE("--format json prints exactly the summary on stdout and logs only on stderr") {
  SmallRun run({"--format", "json"});
  const auto lines = split_lines(run.result.out);
  INFO("stdout: " << run.result.out);
  REQUIRE(lines.size() == 1);
  const auto summary = nlohmann::json::parse(lines[0]);
  REQUIRE(summary.is_object());
  CHECK(summary.at("event") == "summary");
  CHECK(summary.at("steps") == 6);
  CHECK(finite_number(summary.at("final_loss")));
  CHECK(finite_number(summary.at("final_val_loss")));
  CHECK(finite_number(summary.at("unigram_entropy")));
  CHECK(summary == read_jsonl(run.out / "metrics.jsonl").back());
  CHECK_FALSE(run.result.err.empty());  // the logs went to stderr
}

TEST_CASE("the text format prints nothing on stdout") {
  SmallRun run;
  CHECK(run.result.out.empty());
  CHECK_FALSE(run.result.err.empty());
}

TEST_CASE("a run folder that already holds a run is refused with exit 2 and left as it was") {
  SmallRun run;
  const std::string metrics = read_text(run.out / "metrics.jsonl");
  const std::string weights = read_text(run.out / "weights.safetensors");
  const CommandResult again =
      run_conveyor({"train", run.config, "--set", "data.path=" + (run.dir / "english.txt"),
                    "--out", run.out.string()},
                   30);
  INFO("stderr: " << again.err);
  CHECK(again.exit_code == 2);
  CHECK(again.out.empty());
  const auto lines = split_lines(again.err);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].rfind("error: ", 0) == 0);
  CHECK(lines[0].find(run.out.string()) != std::string::npos);
  CHECK(read_text(run.out / "metrics.jsonl") == metrics);
  CHECK(read_text(run.out / "weights.safetensors") == weights);
}
