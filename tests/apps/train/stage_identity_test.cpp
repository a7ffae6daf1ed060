// Through the `conveyor` command: the same job trained on 1, 2, 3 or 4 stages, with GPipe
// or 1F1B, writes bitwise-identical weights and reports identical losses. This is the
// promise of README.md ("bitwise identical whatever the number of stages or the
// schedule") checked on the files a user gets, not on the library's return values; for a
// Llama (model.arch llama) too, with ZBV, the other schedules, half-block and automatic
// partitions and model.recompute.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/io/safetensors.hpp"
#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

struct RunFiles {
  std::vector<NamedTensor> weights;
  std::vector<double> step_losses;
  nlohmann::json summary;
};

RunFiles train_split(const std::string& data, int stages, const std::string& schedule,
                     const fs::path& out, const std::vector<std::string>& sets = {}) {
  auto args = small_job(data);
  for (const auto& set : sets) args.insert(args.end(), {"--set", set});
  args.insert(args.end(), {"--set", "pipeline.stages=" + std::to_string(stages), "--set",
                           "pipeline.schedule=" + schedule, "--out", out.string(), "--format",
                           "json"});
  const CommandResult r = train_ok(args);
  RunFiles f;
  f.summary = nlohmann::json::parse(r.out);
  f.weights = read_safetensors((out / "weights.safetensors").string());
  for (const auto& row : read_jsonl(out / "metrics.jsonl"))
    if (row.contains("step") && !row.contains("event")) f.step_losses.push_back(row.at("loss").get<double>());
  return f;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

// Every weight, loss and the final losses of `got` are `ref`'s, bit for bit.
void check_same_run(const RunFiles& got, const RunFiles& ref) {
  REQUIRE(got.weights.size() == ref.weights.size());
  for (std::size_t i = 0; i < ref.weights.size(); ++i) {
    CAPTURE(ref.weights[i].name);
    CHECK(got.weights[i].name == ref.weights[i].name);
    CHECK(same_bytes(got.weights[i].tensor, ref.weights[i].tensor));
  }
  CHECK(got.step_losses == ref.step_losses);  // exact: the same doubles
  CHECK(got.summary.at("final_loss") == ref.summary.at("final_loss"));
  CHECK(got.summary.at("final_val_loss") == ref.summary.at("final_val_loss"));
}

// small_job as a Llama of 8 layers (ZBV on 4 stages runs 8 chunks): 4 query heads on 2
// key/value heads, a SwiGLU of 64, llama3 rope scaling over an original context of 16
// (the head size 8 gives one blended frequency and three divided ones), tied embeddings.
const std::vector<std::string> kLlama{
    "model.arch=llama",        "model.layers=8",         "model.heads=4",
    "model.kv_heads=2",        "model.ffn_dim=64",       "model.rope_scaling=llama3",
    "model.rope_original_max_position=16", "model.tie_embeddings=true"};

std::vector<std::string> llama_with(std::vector<std::string> more) {
  more.insert(more.begin(), kLlama.begin(), kLlama.end());
  return more;
}

}  // namespace

TEST_CASE("training through the CLI on 1 to 4 stages with gpipe or 1f1b writes bitwise-identical weights") {
  TempDir dir;
  const std::string data = copy_english_text(dir);
  const RunFiles ref = train_split(data, 1, "gpipe", dir.path() / "ref");
  REQUIRE(ref.weights.size() == 2 + 12 * 4 + 3);  // wte, wpe, 4 blocks, ln_f, lm_head
  REQUIRE(ref.step_losses.size() == 6);

  for (const int stages : {1, 2, 3, 4}) {
    for (const std::string schedule : {"gpipe", "1f1b"}) {
      if (stages == 1 && schedule == "gpipe") continue;  // the reference itself
      CAPTURE(stages);
      CAPTURE(schedule);
      const RunFiles got = train_split(
          data, stages, schedule, dir.path() / (schedule + "_" + std::to_string(stages)));
      REQUIRE(got.weights.size() == ref.weights.size());
      for (std::size_t i = 0; i < ref.weights.size(); ++i) {
        CAPTURE(ref.weights[i].name);
        CHECK(got.weights[i].name == ref.weights[i].name);
        CHECK(same_bytes(got.weights[i].tensor, ref.weights[i].tensor));
      }
      CHECK(got.step_losses == ref.step_losses);  // exact: the same doubles
      CHECK(got.summary.at("final_loss") == ref.summary.at("final_loss"));
      CHECK(got.summary.at("final_val_loss") == ref.summary.at("final_val_loss"));
    }
  }
}

TEST_CASE("training a Llama through the CLI on 1, 2 and 4 stages with gpipe, 1f1b or zbv writes bitwise-identical weights") {
  TempDir dir;
  const std::string data = copy_english_text(dir);
  const RunFiles ref = train_split(data, 1, "gpipe", dir.path() / "ref", kLlama);
  // wte, 8 blocks of attn_norm, qkv, o, mlp_norm, gate_up, down, norm_f, lm_head
  REQUIRE(ref.weights.size() == 1 + 6 * 8 + 2);
  CHECK(ref.weights[1].name == "blocks.0.attn_norm.weight");
  REQUIRE(ref.step_losses.size() == 6);
  CHECK(ref.step_losses.back() < ref.step_losses.front());
  for (const int stages : {1, 2, 4}) {
    for (const std::string schedule : {"gpipe", "1f1b", "zbv"}) {
      if (stages == 1 && schedule == "gpipe") continue;  // the reference itself
      CAPTURE(stages);
      CAPTURE(schedule);
      check_same_run(train_split(data, stages, schedule,
                                 dir.path() / (schedule + "_" + std::to_string(stages)), kLlama),
                     ref);
    }
  }
}

TEST_CASE("a Llama trains to the same bits with interleaved-1f1b, zb-h1, half-block and auto partitions and model.recompute") {
  TempDir dir;
  const std::string data = copy_english_text(dir);
  const RunFiles ref = train_split(data, 1, "gpipe", dir.path() / "ref", kLlama);
  const std::vector<std::tuple<std::string, int, std::string, std::vector<std::string>>> runs{
      {"interleaved", 2, "interleaved-1f1b", {"pipeline.virtual_stages=2"}},
      {"zb-h1", 4, "zb-h1", {}},
      {"half blocks", 2, "1f1b", {"pipeline.partition=[3.5, 4.5]"}},
      {"half blocks zbv", 2, "zbv", {"pipeline.partition=[2, 1.5, 2.5, 2]"}},
      {"auto", 2, "1f1b", {"pipeline.partition=auto"}},
      {"recompute full", 2, "zbv", {"model.recompute=full"}},
      {"recompute attention", 4, "1f1b", {"model.recompute=attention"}}};
  for (const auto& [name, stages, schedule, sets] : runs) {
    CAPTURE(name);
    std::string folder = name;
    std::replace(folder.begin(), folder.end(), ' ', '-');
    check_same_run(train_split(data, stages, schedule, dir.path() / folder, llama_with(sets)), ref);
  }
}

TEST_CASE("a Llama over 2 data-parallel replicas follows one replica's losses within 1e-6") {
  TempDir dir;
  const std::string data = copy_english_text(dir);
  const RunFiles one = train_split(data, 2, "1f1b", dir.path() / "one", kLlama);
  const RunFiles two = train_split(data, 2, "1f1b", dir.path() / "two", llama_with({"parallel.data=2"}));
  REQUIRE(two.step_losses.size() == one.step_losses.size());
  for (std::size_t s = 0; s < one.step_losses.size(); ++s) {
    CAPTURE(s);
    CHECK(std::fabs(two.step_losses[s] - one.step_losses[s]) <= 1e-6 * std::fabs(one.step_losses[s]));
  }
}
