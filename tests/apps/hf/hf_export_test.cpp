// `conveyor hf export` through the real binary: a Hugging Face folder imported and exported
// again is itself (every tensor bit for bit, a tied head left out), importing the export
// gives the same checkpoint, and exporting that the same config.json, for Llama (GQA,
// tied and untied, llama3 rope scaling) and GPT-2 (tied and untied); a bf16 export is the
// fp32 one rounded to nearest even; bad input exits 2 naming it and creates nothing.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <set>

#include "kernels/io/safetensors.hpp"
#include "kernels/tensor/bf16.hpp"
#include "tests/apps/train/train_test_support.hpp"
#include "tests/support/hf_model_folder.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

CommandResult conveyor_ok(const std::vector<std::string>& args) {
  auto r = run_conveyor(args, 120);
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

// The folder written from `tensors`, imported, exported (fp32), imported and exported again.
void check_round_trip(const nlohmann::json& config, const std::vector<HfTensor>& tensors) {
  TempDir dir;
  write_hf_folder(dir.path() / "hf", config, tensors, "F32");
  conveyor_ok({"hf", "import", dir / "hf", "--out", dir / "ckpt"});
  const auto r = conveyor_ok({"hf", "export", dir / "ckpt", "--out", dir / "hf2", "--format", "json"});
  const auto json = nlohmann::json::parse(r.out);
  CHECK(json.at("architecture") == config.at("architectures")[0]);
  CHECK(json.at("source") == "checkpoint");
  CHECK(json.at("dtype") == "fp32");
  for (const auto& e : fs::directory_iterator(dir.path())) CHECK(e.path().filename().string()[0] != '.');

  // The export is the folder: the same tensors, bit for bit (a tied head, saved or not, left out).
  const auto exported = read_safetensors_with_metadata(dir / "hf2/model.safetensors");
  CHECK(exported.metadata.at("format") == "pt");
  std::set<std::string> want, got;
  for (const auto& t : tensors)
    if (!(config.value("tie_word_embeddings", false) && t.name == "lm_head.weight")) want.insert(t.name);
  for (const auto& e : exported.tensors) {
    INFO(e.name);
    got.insert(e.name);
    const HfTensor& t = hf_tensor(tensors, e.name);
    CHECK(e.tensor.shape() == Shape(t.shape));
    REQUIRE(static_cast<std::size_t>(e.tensor.numel()) == t.values.size());
    CHECK(std::memcmp(e.tensor.f32(), t.values.data(), t.values.size() * 4) == 0);
  }
  CHECK(got == want);
  const auto hf2_config = nlohmann::json::parse(read_text(dir.path() / "hf2/config.json"));
  CHECK(hf2_config.at("torch_dtype") == "float32");
  CHECK(hf2_config.at("architectures") == config.at("architectures"));

  // import -> export -> import: the same weights; export again: the same config.json.
  conveyor_ok({"hf", "import", dir / "hf2", "--out", dir / "ckpt2"});
  CHECK(run_conveyor({"checkpoint", "diff", dir / "ckpt", dir / "ckpt2"}).exit_code == 0);
  conveyor_ok({"hf", "export", dir / "ckpt2", "--out", dir / "hf3"});
  CHECK(read_text(dir.path() / "hf3/config.json") == read_text(dir.path() / "hf2/config.json"));
  CHECK(read_text(dir.path() / "hf3/model.safetensors") == read_text(dir.path() / "hf2/model.safetensors"));
}

}  // namespace

TEST_CASE("hf export round trip: Llama with grouped-query attention, untied") {
  const auto config = small_llama_config(2, 32, 4, 2, 48, 260, false);
  check_round_trip(config, llama_tensors(config, "F32", 11));
}

TEST_CASE("hf export round trip: Llama 3.1-style (llama3 rope scaling, one kv head, tied)") {
  auto config = small_llama_config(2, 32, 4, 1, 48, 260, true);
  config["rope_theta"] = 500000.0;
  config["rope_scaling"] = {{"rope_type", "llama3"},
                            {"factor", 32.0},
                            {"low_freq_factor", 1.0},
                            {"high_freq_factor", 4.0},
                            {"original_max_position_embeddings", 8192}};
  check_round_trip(config, llama_tensors(config, "F32", 12));
  TempDir dir;
  write_hf_folder(dir.path() / "hf", config, llama_tensors(config, "F32", 12), "F32");
  conveyor_ok({"hf", "import", dir / "hf", "--out", dir / "ckpt"});
  conveyor_ok({"hf", "export", dir / "ckpt", "--out", dir / "out"});
  const auto json = nlohmann::json::parse(read_text(dir.path() / "out/config.json"));
  CHECK(json.at("rope_scaling") == config.at("rope_scaling"));
  CHECK(json.at("rope_theta") == 500000.0);
  CHECK(json.at("num_key_value_heads") == 1);
  CHECK(json.at("head_dim") == 8);
  CHECK(json.at("tie_word_embeddings") == true);
  CHECK(json.at("max_position_embeddings") == 64);
}

TEST_CASE("hf export round trip: GPT-2, tied and untied") {
  auto config = small_gpt2_config(2, 32, 4, 260, 64);
  check_round_trip(config, gpt2_tensors(config, "F32", 13));
  config["tie_word_embeddings"] = false;
  auto tensors = gpt2_tensors(config, "F32", 14);
  std::mt19937 rng(15);
  tensors.push_back(random_tensor(rng, "lm_head.weight", {260, 32}, "F32"));
  check_round_trip(config, tensors);
}

TEST_CASE("hf export --dtype bf16 holds the fp32 export's values rounded to nearest even") {
  TempDir dir;
  const auto config = small_gpt2_config(2, 32, 4, 260, 64);
  write_hf_folder(dir.path() / "hf", config, gpt2_tensors(config, "F32", 16), "F32");
  conveyor_ok({"hf", "import", dir / "hf", "--out", dir / "ckpt"});
  conveyor_ok({"hf", "export", dir / "ckpt", "--out", dir / "fp32"});
  conveyor_ok({"hf", "export", dir / "ckpt", "--out", dir / "bf16", "--dtype", "bf16"});
  CHECK(nlohmann::json::parse(read_text(dir.path() / "bf16/config.json")).at("torch_dtype") == "bfloat16");
  const auto f = read_safetensors(dir / "fp32/model.safetensors");
  const auto b = read_safetensors(dir / "bf16/model.safetensors");
  REQUIRE(f.size() == b.size());
  std::size_t rounded_away = 0;  // values bf16 does not hold: the test rounds some
  for (std::size_t i = 0; i < f.size(); ++i) {
    INFO(f[i].name);
    CHECK(b[i].name == f[i].name);
    REQUIRE(b[i].tensor.dtype() == DType::bf16);
    REQUIRE(b[i].tensor.numel() == f[i].tensor.numel());
    const auto* bits = static_cast<const std::uint16_t*>(b[i].tensor.raw());
    std::size_t wrong = 0;
    for (std::int64_t k = 0; k < f[i].tensor.numel(); ++k) {
      wrong += bits[k] != float_to_bf16_bits(f[i].tensor.f32()[k]);
      rounded_away += bf16_bits_to_float(bits[k]) != f[i].tensor.f32()[k];
    }
    CHECK(wrong == 0);
  }
  CHECK(rounded_away > 0);
  // And it imports: what transformers would read.
  conveyor_ok({"hf", "import", dir / "bf16", "--out", dir / "ckpt-bf16"});
}

TEST_CASE("hf export of bad input exits 2 naming it and creates nothing") {
  TempDir dir;
  const auto config = small_gpt2_config(1, 16, 2, 260, 16);
  write_hf_folder(dir.path() / "hf", config, gpt2_tensors(config, "F32", 17), "F32");
  conveyor_ok({"hf", "import", dir / "hf", "--out", dir / "ckpt"});
  fs::create_directories(dir.path() / "empty");
  fs::create_directories(dir.path() / "taken");
  auto refused = [&](std::vector<std::string> args, const std::string& message) {
    args.insert(args.begin(), {"hf", "export"});
    const auto r = run_conveyor(args);
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "error:"));
    CHECK(contains(r.err, message));
    CHECK(!fs::exists(dir.path() / "out"));
  };
  refused({dir / "missing", "--out", dir / "out"}, dir / "missing");
  refused({dir / "empty", "--out", dir / "out"}, dir / "empty");
  refused({dir / "hf", "--out", dir / "out"}, "is a Hugging Face folder already");
  refused({dir / "ckpt", "--out", dir / "out", "--dtype", "fp16"}, "--dtype fp16");
  refused({dir / "ckpt", "--out", dir / "taken"}, "exists");
  refused({dir / "ckpt", "--out", dir / "ckpt/step-000000/hf"}, "inside the checkpoint folder");
  CHECK(!fs::exists(dir.path() / "ckpt/step-000000/hf"));
  for (const auto& e : fs::directory_iterator(dir.path())) CHECK(e.path().filename().string()[0] != '.');
}

TEST_CASE("hf export --help names its options on stdout and exits 0") {
  const auto r = run_conveyor({"hf", "export", "--help"}, 30);
  CHECK(r.exit_code == 0);
  for (const char* option : {"--out", "--dtype", "--format", "bf16", "LlamaForCausalLM", "from_pretrained"})
    CHECK(contains(r.out, option));
}
