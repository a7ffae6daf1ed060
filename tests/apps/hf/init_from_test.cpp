// `conveyor train --init-from` through the real binary: a run initialised from a Hugging
// Face folder is, bit for bit, the run resumed from that folder's import (same first loss,
// same final weights); from a checkpoint written with one stage it trains on two as the
// resharded resume does; a config of another model exits 2 naming the key and both values;
// --init-from with --resume exits 2; and the three commands of a fine-tune (import or
// --init-from, train, export) hand the weights on unchanged.
#include <doctest/doctest.h>

#include <filesystem>

#include "tests/apps/train/train_test_support.hpp"
#include "tests/support/hf_model_folder.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::vector<nlohmann::json> step_rows_of(const fs::path& metrics) {
  std::vector<nlohmann::json> out;
  for (const auto& row : read_jsonl(metrics))
    if (!row.contains("event")) out.push_back(row);
  return out;
}

nlohmann::json event_row(const fs::path& metrics, const std::string& event) {
  for (const auto& row : read_jsonl(metrics))
    if (row.value("event", "") == event) return row;
  return nullptr;
}

// A small Llama folder (GQA) and its import, in `dir`.
void llama_folder_and_import(const TempDir& dir) {
  const auto config = small_llama_config(2, 32, 4, 2, 48, 260, false);
  write_hf_folder(dir.path() / "hf", config, llama_tensors(config, "F32", 31), "F32");
  const auto r = run_conveyor({"hf", "import", dir / "hf", "--out", dir / "ckpt"});
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
}

const std::vector<std::string> kShort = {"--set", "train.steps=2", "--set", "train.eval_every=0"};

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

}  // namespace

TEST_CASE("train --init-from a Hugging Face folder is the run resumed from its import, bit for bit") {
  TempDir dir;
  llama_folder_and_import(dir);
  const std::string config = dir / "ckpt/config.yaml";
  const auto init = train_ok(with({config, "--out", dir / "init", "--init-from", dir / "hf"}, kShort), 300);
  train_ok(with({config, "--out", dir / "resumed", "--resume", dir / "ckpt"}, kShort), 300);
  CHECK(contains(init.err, "initialising the weights from LlamaForCausalLM of the Hugging Face folder"));

  const auto a = step_rows_of(dir.path() / "init/metrics.jsonl");
  const auto b = step_rows_of(dir.path() / "resumed/metrics.jsonl");
  REQUIRE(a.size() == 2);
  REQUIRE(b.size() == 2);
  CHECK(a[0].at("step") == 0);
  CHECK(a[0].at("loss") == b[0].at("loss"));
  CHECK(run_conveyor({"checkpoint", "diff", dir / "init/weights.safetensors", dir / "resumed/weights.safetensors"})
            .exit_code == 0);
  const auto row = event_row(dir.path() / "init/metrics.jsonl", "init_from");
  REQUIRE(row.is_object());
  CHECK(row.at("from") == dir / "hf");
  CHECK(row.at("source") == "hf_folder");
  CHECK(row.at("weights_step") == 0);
  CHECK(event_row(dir.path() / "init/metrics.jsonl", "resume").is_null());
}

TEST_CASE("train --init-from a one-stage checkpoint on two stages equals the resharded resume") {
  TempDir dir;
  llama_folder_and_import(dir);
  const std::string config = dir / "ckpt/config.yaml";
  const std::vector<std::string> two = {"--set", "pipeline.stages=2", "--set", "pipeline.schedule=gpipe"};
  train_ok(with(with({config, "--out", dir / "init", "--init-from", dir / "ckpt"}, kShort), two), 300);
  train_ok(with(with({config, "--out", dir / "resumed", "--resume", dir / "ckpt"}, kShort), two), 300);
  CHECK(run_conveyor({"checkpoint", "diff", dir / "init/weights.safetensors", dir / "resumed/weights.safetensors"})
            .exit_code == 0);
  const auto row = event_row(dir.path() / "init/metrics.jsonl", "init_from");
  REQUIRE(row.is_object());
  CHECK(row.at("source") == "checkpoint");
  CHECK(contains(row.at("from").get<std::string>(), "step-000000"));
}

TEST_CASE("train --init-from weights of another model exits 2 naming the key and both values") {
  TempDir dir;
  llama_folder_and_import(dir);
  const std::string config = dir / "ckpt/config.yaml";
  auto refused = [&](const std::vector<std::string>& sets, const std::string& message) {
    std::vector<std::string> args = {"train", config, "--out", dir / "run", "--init-from", dir / "hf"};
    for (const auto& s : sets) args.insert(args.end(), {"--set", s});
    const auto r = run_conveyor(args);
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "error: --init-from"));
    CHECK(contains(r.err, message));
    CHECK(!fs::exists(dir.path() / "run"));
  };
  refused({"model.d_model=64"}, "model.d_model 32 (weights) vs 64 (this run)");
  refused({"model.layers=3"}, "model.layers 2 (weights) vs 3 (this run)");
  refused({"model.kv_heads=4"}, "model.kv_heads 2 (weights) vs 4 (this run)");
  refused({"model.ffn_dim=64"}, "model.ffn_dim 48 (weights) vs 64 (this run)");
  refused({"model.tie_embeddings=true"}, "model.tie_embeddings false (weights) vs true (this run)");

  // GPT-2: a shorter seq_len keeps wpe's first rows; a longer one has no positions to learn from.
  const auto gpt2 = small_gpt2_config(2, 32, 4, 260, 64);
  write_hf_folder(dir.path() / "gpt2", gpt2, gpt2_tensors(gpt2, "F32", 32), "F32");
  const std::vector<std::string> gpt2_run = {"train", "--out", dir / "g", "--init-from", dir / "gpt2",
                                             "--set", "model.layers=2", "--set", "model.d_model=32",
                                             "--set", "model.heads=4", "--set", "model.vocab=260",
                                             "--set", "model.tie_embeddings=true", "--set", "train.steps=1",
                                             "--set", "train.eval_every=0", "--set", "pipeline.stages=2"};
  auto r = run_conveyor(with(gpt2_run, {"--set", "model.seq_len=128"}));
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "model.seq_len 128 (this run) is longer than the 64 positions of the weights"));
  CHECK(!fs::exists(dir.path() / "g"));
  r = run_conveyor(with(gpt2_run, {"--set", "model.seq_len=32"}), 300);
  CHECK(r.exit_code == 0);
}

TEST_CASE("train --init-from with --resume exits 2") {
  TempDir dir;
  const auto r = run_conveyor({"train", "--out", dir / "run", "--init-from", dir / "a", "--resume", dir / "b"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--init-from"));
  CHECK(contains(r.err, "--resume"));
  CHECK(!fs::exists(dir.path() / "run"));
}

TEST_CASE("a fine-tune in three commands: train --init-from HF_DIR, then hf export of the run") {
  TempDir dir;
  llama_folder_and_import(dir);
  train_ok(with({dir / "ckpt/config.yaml", "--out", dir / "run", "--init-from", dir / "hf"}, kShort), 300);
  const auto r = run_conveyor({"hf", "export", dir / "run", "--out", dir / "tuned", "--format", "json"});
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  const auto json = nlohmann::json::parse(r.out);
  CHECK(json.at("source") == "run_weights");
  CHECK(json.at("step") == 2);
  // The export holds the run's final weights: imported back, they are weights.safetensors.
  REQUIRE(run_conveyor({"hf", "import", dir / "tuned", "--out", dir / "back"}).exit_code == 0);
  CHECK(run_conveyor({"checkpoint", "diff", dir / "back", dir / "run/weights.safetensors"}).exit_code == 0);
  // And the tuned folder fine-tunes further.
  train_ok(with({dir / "ckpt/config.yaml", "--out", dir / "run2", "--init-from", dir / "tuned"}, kShort), 300);
}

TEST_CASE("train --supervise --init-from: a killed fine-tune starts again from the weights or resumes its checkpoint, bitwise") {
  TempDir dir;
  llama_folder_and_import(dir);
  auto job = [&](const std::string& out, const std::vector<std::string>& sets, bool supervise) {
    std::vector<std::string> args = {"train", dir / "ckpt/config.yaml", "--out", dir / out, "--init-from", dir / "hf",
                                     "--set", "train.steps=8", "--set", "train.eval_every=0"};
    for (const auto& s : sets) args.insert(args.end(), {"--set", s});
    if (supervise) args.push_back("--supervise");
    return args;
  };
  REQUIRE(run_conveyor(job("clean", {}, false), 300).exit_code == 0);
  const std::string weights = read_text(dir.path() / "clean/weights.safetensors");

  auto r = run_conveyor(job("fresh", {"fault.inject=[exit:node=0:step=1]"}, true), 300);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.err, "starting attempt 2"));
  CHECK(read_text(dir.path() / "fresh/weights.safetensors") == weights);

  r = run_conveyor(job("resumed", {"checkpoint.every=2", "fault.inject=[exit:node=0:step=5]"}, true), 300);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  // From the checkpoint of step 2 or 4 when one was written before the kill (they are
  // written in the background), else from the weights again: the same bits either way.
  CHECK(contains(r.err, "starting attempt 2 of 4 from"));
  CHECK(read_text(dir.path() / "resumed/weights.safetensors") == weights);
}

TEST_CASE("train --help names --init-from") {
  const auto r = run_conveyor({"train", "--help"}, 30);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "--init-from"));
}
