// `conveyor hf import` through the real binary: a Llama folder (sharded, bf16) becomes a
// checkpoint that verifies, exports the expected weights, holds exactly the names and
// shapes of the weights conveyor writes for the same model, and that `train --resume`
// continues; a GPT-2 folder likewise; bad folders exit 2 naming the problem and leave no
// --out behind.
#include <doctest/doctest.h>

#include <filesystem>

#include "kernels/io/safetensors.hpp"
#include "tests/apps/train/train_test_support.hpp"
#include "tests/support/hf_model_folder.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

const NamedTensor& named(const std::vector<NamedTensor>& tensors, const std::string& name) {
  for (const auto& t : tensors)
    if (t.name == name) return t;
  throw std::invalid_argument("no tensor " + name);
}

bool equals(const Tensor& got, const std::vector<float>& want) {
  if (static_cast<std::size_t>(got.numel()) != want.size()) return false;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (got.f32()[i] != want[i]) return false;
  return true;
}

}  // namespace

TEST_CASE("hf import of a sharded bf16 Llama: a checkpoint train --resume starts from") {
  TempDir dir;
  const auto config = small_llama_config(2, 32, 4, 2, 48, 260, false);
  const auto t = llama_tensors(config, "BF16", 42);
  write_hf_folder(dir.path() / "hf", config, t, "BF16", 2);
  const std::string out = dir / "ckpt";

  auto r = run_conveyor({"hf", "import", dir / "hf", "--out", out, "--format", "json"});
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  const auto json = nlohmann::json::parse(r.out);
  CHECK(json.at("architecture") == "LlamaForCausalLM");
  CHECK(json.at("model").at("arch") == "llama");
  CHECK(json.at("model").at("kv_heads") == 2);
  CHECK(json.at("model").at("ffn_dim") == 48);
  CHECK(json.at("tensors") == 1 + 2 * 6 + 2);
  CHECK(json.at("dtypes").at("BF16") == static_cast<int>(t.size()));
  CHECK(json.at("checkpoint") == (fs::path(out) / "step-000000").string());
  CHECK(fs::is_regular_file(fs::path(out) / "config.yaml"));
  for (const auto& e : fs::directory_iterator(dir.path())) CHECK(e.path().filename().string()[0] != '.');

  // The checkpoint verifies, and its weights are the folder's, fused.
  r = run_conveyor({"checkpoint", "verify", out});
  CHECK(r.exit_code == 0);
  r = run_conveyor({"checkpoint", "export", out, "--out", dir / "imported.safetensors"});
  REQUIRE(r.exit_code == 0);
  const auto imported = read_safetensors(dir / "imported.safetensors");
  CHECK(equals(named(imported, "wte.weight").tensor, hf_tensor(t, "model.embed_tokens.weight").values));
  std::vector<float> qkv;
  for (const char* p : {"q_proj", "k_proj", "v_proj"}) {
    const auto& v = hf_tensor(t, std::string("model.layers.1.self_attn.") + p + ".weight").values;
    qkv.insert(qkv.end(), v.begin(), v.end());
  }
  CHECK(equals(named(imported, "blocks.1.attn.qkv.weight").tensor, qkv));
  CHECK(equals(named(imported, "lm_head.weight").tensor, hf_tensor(t, "lm_head.weight").values));

  // Names and shapes are those conveyor itself writes for the model of config.yaml.
  train_ok({out + "/config.yaml", "--out", dir / "fresh", "--set", "train.steps=1", "--set", "train.eval_every=0",
            "--set", "pipeline.micro_batches=2"},
           300);
  const auto fresh = read_safetensors(dir / "fresh/weights.safetensors");
  REQUIRE(fresh.size() == imported.size());
  for (std::size_t i = 0; i < fresh.size(); ++i) {
    CHECK(fresh[i].name == imported[i].name);
    CHECK(fresh[i].tensor.shape() == imported[i].tensor.shape());
  }

  // train --resume starts from the import (step 0), on 2 stages: the checkpoint reshards.
  r = train_ok({out + "/config.yaml", "--out", dir / "tuned", "--resume", out, "--set", "train.steps=2", "--set",
                "train.eval_every=0", "--set", "pipeline.stages=2"},
               300);
  CHECK(contains(r.err, "step-000000"));
  CHECK(read_jsonl(dir / "tuned/metrics.jsonl").size() >= 2);
}

TEST_CASE("hf import of a GPT-2 folder with --seq-len, then train --resume") {
  TempDir dir;
  const auto config = small_gpt2_config(2, 32, 4, 260, 128);
  write_hf_folder(dir.path() / "hf", config, gpt2_tensors(config, "F32", 8), "F32");
  const std::string out = dir / "ckpt";
  auto r = run_conveyor({"hf", "import", dir / "hf", "--out", out, "--seq-len", "32", "--format", "json"});
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  const auto json = nlohmann::json::parse(r.out);
  CHECK(json.at("model").at("seq_len") == 32);
  CHECK(json.at("max_positions") == 128);
  CHECK(json.at("model").at("tie_embeddings") == true);
  // Another batch than config.yaml's is another run's identity: --force says it is meant.
  const std::vector<std::string> args = {out + "/config.yaml", "--out", dir / "tuned", "--resume", out, "--set",
                                         "train.steps=1", "--set", "train.eval_every=0", "--set",
                                         "pipeline.micro_batches=2"};
  std::vector<std::string> refused = {"train"};
  refused.insert(refused.end(), args.begin(), args.end());
  r = run_conveyor(refused);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "add --force"));
  auto forced = args;
  forced.push_back("--force");
  train_ok(forced, 300);
}

TEST_CASE("hf import of a bad folder exits 2 naming the problem, and writes nothing") {
  TempDir dir;
  const auto good = small_llama_config();
  const auto tensors = llama_tensors(good, "F32", 1);
  auto expect_error = [&](const std::string& name, const nlohmann::json& config, const std::vector<HfTensor>& t,
                          const std::string& message) {
    INFO(name);
    write_hf_folder(dir.path() / name, config, t, "F32");
    const std::string out = dir / (name + "-out");
    const auto r = run_conveyor({"hf", "import", dir / name, "--out", out});
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, message));
    CHECK(!fs::exists(out));
  };
  auto c = good;
  c["architectures"] = {"MistralForCausalLM"};
  expect_error("arch", c, tensors, "architectures: \"MistralForCausalLM\" is not supported");
  c = good;
  c["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  expect_error("rope", c, tensors, "rope_scaling.rope_type: \"dynamic\" is not supported");
  auto missing = tensors;
  std::erase_if(missing, [](const HfTensor& x) { return x.name == "model.norm.weight"; });
  expect_error("missing", good, missing, "missing tensors: model.norm.weight (for norm_f.weight)");
  auto misshapen = tensors;
  for (auto& x : misshapen)
    if (x.name == "model.layers.1.mlp.down_proj.weight") x.shape = {48, 32};
  expect_error("shape", good, misshapen, "model.layers.1.mlp.down_proj.weight is [48, 32], the config needs [32, 48]");
  c = good;
  c["num_attention_heads"] = 8;  // head size 4; kv_heads 2 still divides
  c["num_key_value_heads"] = 3;
  expect_error("heads", c, tensors, "model.kv_heads");

  // An existing --out is refused before anything is read.
  fs::create_directories(dir.path() / "taken");
  write_hf_folder(dir.path() / "ok", good, tensors, "F32");
  const auto r = run_conveyor({"hf", "import", dir / "ok", "--out", dir / "taken"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "exists"));
}

TEST_CASE("hf import --help names its options on stdout and exits 0") {
  const auto r = run_conveyor({"hf", "import", "--help"}, 30);
  CHECK(r.exit_code == 0);
  for (const char* option : {"--out", "--seq-len", "--format", "LlamaForCausalLM"}) CHECK(contains(r.out, option));
}

TEST_CASE("hf import of a Llama 3.1-style config (transformers 5's rope_parameters, llama3 scaling, tied)") {
  TempDir dir;
  auto config = small_llama_config(2, 32, 4, 1, 48, 260, true);
  config.erase("rope_theta");
  config.erase("rope_scaling");
  config["rope_parameters"] = {{"rope_type", "llama3"},
                               {"rope_theta", 500000.0},
                               {"factor", 32.0},
                               {"low_freq_factor", 1.0},
                               {"high_freq_factor", 4.0},
                               {"original_max_position_embeddings", 8192}};
  config["head_dim"] = 8;
  auto t = llama_tensors(config, "BF16", 3);
  t.push_back({"lm_head.weight", {260, 32}, hf_tensor(t, "model.embed_tokens.weight").values});  // saved though tied
  write_hf_folder(dir.path() / "hf", config, t, "BF16");
  const auto r = run_conveyor({"hf", "import", dir / "hf", "--out", dir / "ckpt", "--format", "json"});
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  const auto json = nlohmann::json::parse(r.out);
  CHECK(json.at("model").at("rope_scaling") == "llama3");
  CHECK(json.at("model").at("rope_theta") == 500000.0);
  CHECK(json.at("model").at("kv_heads") == 1);
  CHECK(json.at("ignored") == 1);  // the tied lm_head.weight
  const std::string yaml = read_text(dir.path() / "ckpt/config.yaml");
  for (const char* line : {"rope_scaling: llama3", "rope_scaling_factor: 32", "rope_original_max_position: 8192",
                           "tie_embeddings: true"})
    CHECK(contains(yaml, line));
  CHECK(run_conveyor({"checkpoint", "verify", dir / "ckpt"}).exit_code == 0);
}
