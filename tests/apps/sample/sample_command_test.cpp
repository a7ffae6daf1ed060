// `conveyor sample` through the binary: a Hugging Face GPT-2 folder with a tokenizer.json
// (the hand-made one of tests/apps/tokenizer/hand_tokenizer.hpp) encodes the prompt and
// decodes the text; a seed repeats its text; greedy is the library's generate(); bad flags
// are exit 2 naming the flag; JSON alone on stdout. And train.sample_every: a tiny run
// writes `sample` rows from its checkpoints, and its config is refused without them.
#include <doctest/doctest.h>

#include <filesystem>
#include <random>

#include "apps/sample/generate.hpp"
#include "apps/sample/sample_model.hpp"
#include "kernels/model/kv_decoder.hpp"
#include "tests/apps/tokenizer/hand_tokenizer.hpp"
#include "tests/apps/train/train_test_support.hpp"
#include "tests/support/hf_model_folder.hpp"

#if CONVEYOR_WITH_CUDA
#include "kernels/cuda/model/cuda_stage_model.hpp"
#endif

using namespace conveyor;
using namespace conveyor::testing;

namespace {

// A random GPT-2 of vocab 300 (the hand tokenizer's 267 tokens fit) with the tokenizer.
std::string gpt2_folder(const TempDir& dir, unsigned seed) {
  const auto config = small_gpt2_config(2, 32, 4, 300, 64);
  write_hf_folder(dir.path() / "hf", config, gpt2_tensors(config, "F32", seed), "F32");
  write_text_file(dir / "hf/tokenizer.json", tokenizer::testing::hand_tokenizer_json().dump());
  return dir / "hf";
}

nlohmann::json sample_json(const std::vector<std::string>& args) {
  std::vector<std::string> full{"sample"};
  full.insert(full.end(), args.begin(), args.end());
  full.insert(full.end(), {"--format", "json"});
  const CommandResult r = run_conveyor(full);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.out);  // the JSON object alone on stdout
}

}  // namespace

TEST_CASE("conveyor sample encodes the prompt with the folder's tokenizer.json and writes greedy text") {
  TempDir dir;
  const std::string hf = gpt2_folder(dir, std::random_device{}());
  const auto j = sample_json({hf, "--prompt", "the cat", "--tokens", "12", "--temperature", "0"});
  CHECK(j["text_as"] == "bpe");
  CHECK(j["prompt_ids"] == nlohmann::json({116, 257, 32, 99, 97, 116}));  // hand_tokenizer_test's
  REQUIRE(j["ids"].size() == 12);
  // The same as the library: the same weights, generate() greedy.
  SampleModel m = load_sample_model(hf, "");
  KvDecoder decoder(m.model.model, m.model.stage.params());
  const Generated g = generate(decoder, {116, 257, 32, 99, 97, 116}, 12, SamplingSettings{0.0, 0, 0});
  CHECK(j["ids"] == nlohmann::json(g.ids));
  // Random weights write bytes that are no UTF-8: JSON carries them as U+FFFD.
  const std::string text = nlohmann::json(m.codec.decode(g.ids)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  CHECK(j["text"] == nlohmann::json::parse(text));
}

TEST_CASE("conveyor sample repeats its text for a seed and prints text without --format json") {
  TempDir dir;
  const std::string hf = gpt2_folder(dir, std::random_device{}());
  const std::vector<std::string> args = {hf, "--prompt", "hi", "--tokens", "20", "--seed", "7", "--top-k", "50"};
  const auto a = sample_json(args);
  CHECK(sample_json(args)["ids"] == a["ids"]);
  auto other = args;
  other[6] = "8";
  CHECK(sample_json(other)["ids"] != a["ids"]);
  std::vector<std::string> text_args{"sample"};
  text_args.insert(text_args.end(), args.begin(), args.end());
  const CommandResult r = run_conveyor(text_args);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.rfind("hi", 0) == 0);  // the prompt, then the continuation
  CHECK(r.err.find("conveyor sample:") != std::string::npos);
}

TEST_CASE("conveyor sample refuses bad flags with exit 2 naming the flag") {
  TempDir dir;
  const std::string hf = gpt2_folder(dir, 5);
  const auto fails = [&](std::vector<std::string> args, const std::string& flag) {
    args.insert(args.begin(), "sample");
    const CommandResult r = run_conveyor(args);
    CAPTURE(flag);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(flag) != std::string::npos);
    CHECK(r.out.empty());
  };
  fails({hf, "--temperature", "-1"}, "--temperature");
  fails({hf, "--tokens", "0"}, "--tokens");
  fails({hf, "--top-k", "x"}, "--top-k");
  fails({hf, "--device", "gpu"}, "--device");
  fails({hf, "--device", "cuda:99"}, "--device cuda:99");  // no machine has GPU 99
  fails({hf, "--prompt-ids", "1,x"}, "--prompt-ids");
  fails({hf, "--prompt-ids", "300"}, "--prompt-ids");
  fails({hf, "--prompt", std::string(70, 'a')}, "--prompt");  // longer than seq_len 64
  fails({dir / "nowhere"}, "nowhere");
  write_text_file(dir / "bad.json", R"({"model": {"type": "Unigram"}})");
  fails({hf, "--tokenizer", dir / "bad.json"}, "Unigram");
  const CommandResult help = run_conveyor({"sample", "--help"});
  CHECK(help.exit_code == 0);
  CHECK(help.out.find("--temperature") != std::string::npos);
}

TEST_CASE("conveyor sample --device cuda is exit 2 with a clear error where there is no GPU or no CUDA") {
  TempDir dir;
  const std::string hf = gpt2_folder(dir, 9);
#if CONVEYOR_WITH_CUDA
  const bool gpu = cuda_device_available(0);
  const std::string why = "no such GPU on this machine";
#else
  const bool gpu = false;
  const std::string why = "this conveyor was built without CUDA";
#endif
  const CommandResult far = run_conveyor({"sample", hf, "--device", "cuda:99", "--tokens", "2"});
  CHECK(far.exit_code == 2);
  CHECK(far.out.empty());
  CHECK(far.err.find("--device cuda:99: " + why) != std::string::npos);
  const std::vector<std::string> args = {hf, "--device", "cuda", "--prompt", "hi", "--tokens", "6",
                                         "--seed", "3", "--top-k", "20"};
  if (!gpu) {
    std::vector<std::string> full{"sample"};
    full.insert(full.end(), args.begin(), args.end());
    const CommandResult r = run_conveyor(full);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find("--device cuda:0: " + why) != std::string::npos);
    return;
  }
  // With a GPU: its text, and the same text again for the same seed (host sampling over
  // deterministic kernels).
  const auto j = sample_json(args);
  CHECK(j["device"] == "cuda:0");
  CHECK(j["ids"].size() == 6);
  CHECK(sample_json(args)["ids"] == j["ids"]);
}

TEST_CASE("conveyor sample prints ids for a model without a tokenizer, from --prompt-ids") {
  TempDir dir;
  const auto config = small_gpt2_config(2, 32, 4, 300, 64);
  write_hf_folder(dir.path() / "hf", config, gpt2_tensors(config, "F32", 11), "F32");
  const auto j = sample_json({dir / "hf", "--prompt-ids", "5, 6,7", "--tokens", "4"});
  CHECK(j["text_as"] == "ids");
  CHECK(j["prompt_ids"] == nlohmann::json({5, 6, 7}));
  CHECK(j["text"].is_null());
  const CommandResult r = run_conveyor({"sample", dir / "hf"});  // a text prompt cannot be encoded
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--prompt-ids") != std::string::npos);
}

TEST_CASE("train.sample_every writes a sample row from each due checkpoint of a byte-level run") {
  TempDir dir;
  const fs::path run = train_tiny_two_stages(
      dir, "run", {"checkpoint.every=2", "train.sample_every=2", "train.sample_tokens=20", "train.sample_prompt=The"});
  std::vector<nlohmann::json> samples;
  for (const auto& row : read_jsonl(run / "metrics.jsonl"))
    if (row.value("event", "") == "sample") samples.push_back(row);
  REQUIRE(samples.size() == 2);
  CHECK(samples[0]["step"] == 2);
  CHECK(samples[1]["step"] == 4);
  CHECK(samples[0]["prompt"] == "The");
  CHECK(samples[0]["tokens"] == 20);
  // The sample is `conveyor sample` of that checkpoint, greedy.
  const auto j = sample_json({(run / "checkpoints/step-000004").string(), "--prompt", "The", "--tokens", "20",
                              "--temperature", "0"});
  CHECK(j["text_as"] == "bytes");
  CHECK(j["text"] == samples[1]["text"]);
}

TEST_CASE("train.sample_every is refused, naming the key, where no sample can be drawn") {
  const auto refused = [](const std::vector<std::string>& sets, const std::string& words) {
    std::vector<std::string> args{"train", "configs/tiny.yaml", "--set", "train.steps=2"};
    for (const auto& s : sets) args.insert(args.end(), {"--set", s});
    const CommandResult r = run_conveyor(args);
    CAPTURE(words);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("train.sample_every") != std::string::npos);
    CHECK(r.err.find(words) != std::string::npos);
  };
  refused({"train.sample_every=2"}, "checkpoint.every");
  refused({"train.sample_every=3", "checkpoint.every=2"}, "checkpoint.every");
  refused({"train.sample_every=-1"}, "train.sample_every");
}

namespace {

// Little-endian uint16 ids, a repeating phrase below `vocab`.
std::string token_file(std::size_t n, std::uint32_t vocab) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) {
    const auto id = static_cast<std::uint16_t>((i * 7919 + i / 13) % vocab);
    s += static_cast<char>(id & 0xff);
    s += static_cast<char>(id >> 8);
  }
  return s;
}

// --set overrides for a GPT-2 of gpt2_folder's shape on a token file.
std::vector<std::string> token_run(const std::string& data, const fs::path& out) {
  std::vector<std::string> args{"train", "configs/tiny.yaml", "--out", out.string()};
  for (const std::string s :
       {"data.path=" + data, std::string("data.format=tokens"), std::string("model.vocab=300"),
        std::string("model.layers=2"), std::string("model.d_model=32"), std::string("model.heads=4"),
        std::string("pipeline.stages=2"), std::string("model.tie_embeddings=true"),
        std::string("model.seq_len=32"), std::string("train.steps=4"), std::string("train.eval_every=0"),
        std::string("checkpoint.every=2"), std::string("train.sample_every=2"),
        std::string("train.sample_tokens=10"), std::string("train.sample_prompt=the cat")})
    args.insert(args.end(), {"--set", s});
  return args;
}

}  // namespace

TEST_CASE("train.sample_every on token ids writes with the tokenizer.json of the --init-from folder") {
  TempDir dir;
  const std::string hf = gpt2_folder(dir, std::random_device{}());
  const std::string data = dir.write("ids.bin", token_file(6000, 300));
  const fs::path run = dir / "run";
  std::vector<std::string> args = token_run(data, run);
  args.insert(args.end(), {"--init-from", hf});
  const CommandResult r = run_conveyor(args, 300);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  std::vector<nlohmann::json> samples;
  for (const auto& row : read_jsonl(run / "metrics.jsonl"))
    if (row.value("event", "") == "sample") samples.push_back(row);
  INFO(r.err);
  REQUIRE(samples.size() == 2);  // every due checkpoint, also one written while the next was queued
  CHECK(samples[0]["step"] == 2);
  CHECK(samples.back()["step"] == 4);
  CHECK(samples.back()["tokens"] == 10);
  CHECK(samples.back()["prompt"] == "the cat");
  // `conveyor sample` of that checkpoint with the same tokenizer writes the same text.
  const auto j = sample_json({(run / "checkpoints/step-000004").string(), "--tokenizer", hf + "/tokenizer.json",
                              "--prompt", "the cat", "--tokens", "10", "--temperature", "0"});
  CHECK(j["text_as"] == "bpe");
  CHECK(j["text"] == samples.back()["text"]);
}

TEST_CASE("train.sample_every on token ids without a tokenizer is refused at start, naming the key and --init-from") {
  TempDir dir;
  const std::string data = dir.write("ids.bin", token_file(6000, 300));
  const CommandResult r = run_conveyor(token_run(data, dir / "run"), 120);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("train.sample_every") != std::string::npos);
  CHECK(r.err.find("--init-from") != std::string::npos);
  CHECK(!fs::exists(fs::path(dir / "run") / "metrics.jsonl"));  // nothing written
}
