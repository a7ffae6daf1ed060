// conveyor's logits from an imported checkpoint (apps/hf/checkpoint_logits.hpp) against a
// plain double-precision forward of the Hugging Face folder's own tensors
// (tests/support/hf_reference_forward.hpp: nothing of conveyor's kernels or name mapping),
// under the tolerances scripts/hf_reference_check.py holds transformers to; the loss against
// a two-stage pipeline of the same checkpoint; `conveyor hf logits` through the binary.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include "actors/checkpoint/filesystem.hpp"
#include "actors/checkpoint/reader.hpp"
#include "apps/hf/checkpoint_logits.hpp"
#include "apps/hf/hf_import.hpp"
#include "kernels/common/error.hpp"
#include "kernels/io/safetensors.hpp"
#include "tests/apps/train/train_test_support.hpp"
#include "tests/support/hf_model_folder.hpp"
#include "tests/support/hf_reference_forward.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

constexpr std::int64_t kRows = 2, kPositions = 12;

std::vector<std::int32_t> random_rows(std::int64_t vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(kRows * (kPositions + 1)));
  for (auto& id : ids) id = static_cast<std::int32_t>(rng() % static_cast<unsigned>(vocab));
  return ids;
}

Tensor as_tensor(const std::vector<std::int32_t>& ids) {
  Tensor t = Tensor::uninitialized({kRows, kPositions + 1}, DType::i32);
  std::copy(ids.begin(), ids.end(), t.i32());
  return t;
}

// max |got - want| / max |want|: relative to the logits' scale, so that logits near zero
// (where an elementwise ratio means nothing) count by their absolute error.
double max_relative_error(const Tensor& got, const std::vector<double>& want) {
  REQUIRE(static_cast<std::size_t>(got.numel()) == want.size());
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got.f32()[i]) - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return diff / scale;
}

// Imports `config` and `tensors` as an F32 folder; returns the checkpoint folder.
std::string import_folder(const TempDir& dir, const nlohmann::json& config, const std::vector<HfTensor>& tensors) {
  write_hf_folder(dir.path() / "hf", config, tensors, "F32");
  import_hf_folder({(dir.path() / "hf").string(), dir / "ckpt", 0});
  return dir / "ckpt";
}

void check_against_reference(const nlohmann::json& config, const std::vector<HfTensor>& tensors) {
  TempDir dir;
  const std::string ckpt = import_folder(dir, config, tensors);
  CheckpointModel model = load_checkpoint_model(ckpt);
  CHECK(model.step == 0);
  const auto ids = random_rows(model.model.vocab, 11);
  const TokenLogits got = checkpoint_logits(model, as_tensor(ids));
  const HfReferenceOutput want = hf_reference_forward(config, tensors, ids, kRows);
  REQUIRE(got.logits.shape() == Shape{kRows, kPositions, model.model.vocab});
  const double logits_error = max_relative_error(got.logits, want.logits);
  MESSAGE("logits max|a-b|/max|b| = " << logits_error << ", loss " << got.loss << " vs " << want.loss);
  CHECK(logits_error <= 1e-4);
  CHECK(std::abs(got.loss - want.loss) / std::abs(want.loss) <= 1e-5);
}

// Llama 3.1's rope: a context of 8 original positions makes the first of the inverse
// frequencies 1, 0.1, 0.01, 0.001 (head size 8) a blended one and the others divided by
// the factor, so both branches of the scaling are read within 12 positions.
nlohmann::json llama3_rope_config(bool tied) {
  auto c = small_llama_config(2, 32, 4, 2, 48, 96, tied);
  c.erase("rope_theta");
  c.erase("rope_scaling");
  c["rope_parameters"] = {{"rope_type", "llama3"},
                          {"rope_theta", 10000.0},
                          {"factor", 8.0},
                          {"low_freq_factor", 1.0},
                          {"high_freq_factor", 4.0},
                          {"original_max_position_embeddings", 8}};
  return c;
}

}  // namespace

TEST_CASE("hf logits of an imported Llama (grouped-query, llama3 rope, untied) are the folder's model") {
  const auto config = llama3_rope_config(false);
  check_against_reference(config, llama_tensors(config, "F32", 5));
}

TEST_CASE("hf logits of an imported tied Llama with transformers 4's rope_theta are the folder's model") {
  auto config = small_llama_config(2, 32, 4, 1, 40, 96, true);
  config["rope_theta"] = 500000.0;
  check_against_reference(config, llama_tensors(config, "F32", 6));
}

TEST_CASE("hf logits of an imported GPT-2 are the folder's model") {
  const auto config = small_gpt2_config(2, 32, 4, 96, 16);
  check_against_reference(config, gpt2_tensors(config, "F32", 7));
}

TEST_CASE("hf logits' loss is a two-stage pipeline's of the same checkpoint, bit for bit") {
  TempDir dir;
  const auto config = llama3_rope_config(false);
  const std::string ckpt = import_folder(dir, config, llama_tensors(config, "F32", 9));
  CheckpointModel model = load_checkpoint_model(ckpt);
  const auto ids = random_rows(model.model.vocab, 12);
  const double loss = checkpoint_logits(model, as_tensor(ids)).loss;

  // The same weights, read by the checkpoint reader, in two GptStages cut between a block's
  // halves, on the rows shifted by hand.
  auto& files = checkpoint::posix_filesystem();
  const auto loaded = checkpoint::load_checkpoint(files, model.path);
  std::vector<GptStage> stages;
  stages.emplace_back(model.model, StageSlice::of_halves(0, 3, true, false), 1);
  stages.emplace_back(model.model, StageSlice::of_halves(3, 1, false, true), 1);
  for (auto& stage : stages)
    for (Param& p : stage.params()) {
      const Tensor& t = loaded.tensors.at(p.name);
      std::copy(t.f32(), t.f32() + t.numel(), p.value.f32());
    }
  Tensor inputs = Tensor::uninitialized({kRows, kPositions}, DType::i32);
  Tensor targets = Tensor::uninitialized({kRows, kPositions}, DType::i32);
  for (std::int64_t b = 0; b < kRows; ++b)
    for (std::int64_t t = 0; t < kPositions; ++t) {
      inputs.i32()[b * kPositions + t] = ids[static_cast<std::size_t>(b * (kPositions + 1) + t)];
      targets.i32()[b * kPositions + t] = ids[static_cast<std::size_t>(b * (kPositions + 1) + t + 1)];
    }
  const Tensor x = stages[0].forward(inputs, targets, false).activation;
  CHECK(stages[1].forward(x, targets, false).loss == loss);
}

TEST_CASE("hf logits refuses tokens it cannot score, naming why") {
  TempDir dir;
  const auto config = small_gpt2_config(1, 32, 4, 96, 16);
  const std::string ckpt = import_folder(dir, config, gpt2_tensors(config, "F32", 3));
  CheckpointModel model = load_checkpoint_model(ckpt);
  auto refused = [&](const Tensor& tokens, const std::string& message) {
    try {
      checkpoint_logits(model, tokens);
      FAIL("accepted " << tokens.describe());
    } catch (const InputError& e) {
      CHECK_MESSAGE(std::string(e.what()).find(message) != std::string::npos, e.what());
    }
  };
  refused(Tensor::zeros({2, 1}, DType::i32), "T >= 1");
  refused(Tensor::zeros({2, 18}, DType::i32), "beyond the model's seq_len 16");
  refused(Tensor::zeros({2, 5}, DType::f32), "must be i32");
  Tensor bad = Tensor::zeros({1, 5}, DType::i32);
  bad.i32()[4] = 96;  // a target outside the vocabulary
  refused(bad, "outside the vocabulary");
  CHECK_THROWS_AS(load_checkpoint_model(dir / "nothing-here"), InputError);
}

TEST_CASE("conveyor hf logits writes the logits and prints the loss the library computes") {
  TempDir dir;
  const auto config = small_gpt2_config(2, 32, 4, 96, 16);
  const std::string ckpt = import_folder(dir, config, gpt2_tensors(config, "F32", 4));
  const auto ids = random_rows(96, 13);
  write_safetensors(dir / "tokens.safetensors", {{"tokens", as_tensor(ids)}});
  CheckpointModel model = load_checkpoint_model(ckpt);
  const TokenLogits want = checkpoint_logits(model, as_tensor(ids));

  auto r = run_conveyor({"hf", "logits", ckpt, "--tokens", dir / "tokens.safetensors", "--out",
                         dir / "logits.safetensors", "--format", "json"});
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  const auto json = nlohmann::json::parse(r.out);
  CHECK(json.at("loss").get<double>() == want.loss);
  CHECK(json.at("batch") == kRows);
  CHECK(json.at("positions") == kPositions);
  CHECK(json.at("vocab") == 96);
  CHECK(json.at("arch") == "gpt2");
  const auto written = read_safetensors(dir / "logits.safetensors");
  REQUIRE(written.size() == 1);
  CHECK(written[0].name == "logits");
  REQUIRE(written[0].tensor.shape() == want.logits.shape());
  CHECK(std::equal(want.logits.f32(), want.logits.f32() + want.logits.numel(), written[0].tensor.f32()));

  // A file without "tokens" is bad input: exit 2, naming what it holds.
  write_safetensors(dir / "other.safetensors", {{"ids", as_tensor(ids)}});
  r = run_conveyor({"hf", "logits", ckpt, "--tokens", dir / "other.safetensors"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("no tensor \"tokens\"") != std::string::npos);
  CHECK(r.err.find("ids") != std::string::npos);

  // --device: a bad value names the flag; a GPU that is not there (none in CI; on a GPU
  // machine, one beyond any it has) exits 2 naming it.
  r = run_conveyor({"hf", "logits", ckpt, "--tokens", dir / "tokens.safetensors", "--device", "gpu"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--device") != std::string::npos);
  CHECK(r.err.find("'gpu'") != std::string::npos);
  r = run_conveyor({"hf", "logits", ckpt, "--tokens", dir / "tokens.safetensors", "--device", "cuda:97"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--device cuda:97") != std::string::npos);

  r = run_conveyor({"hf", "logits", "--help"}, 30);
  CHECK(r.exit_code == 0);
  for (const char* option : {"--tokens", "--out", "--device", "--format"})
    CHECK(r.out.find(option) != std::string::npos);
}
