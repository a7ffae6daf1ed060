#include <doctest/doctest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "actors/checkpoint/checkpoint_error.hpp"
#include "actors/checkpoint/manifest.hpp"
#include "actors/checkpoint/sha256.hpp"

namespace conveyor::testing {
namespace {

using checkpoint::CheckpointError;
using checkpoint::Manifest;

Manifest sample() {
  Manifest m;
  m.step = 123;
  m.optimizer_steps = 120;
  m.seed = 0xFFFFFFFFFFFFFFFFull;  // the full u64 range must survive JSON
  m.schedule = "zb-h1";
  m.stages = 2;
  m.partition_halves = {6, 3};
  m.config = "model:\n  layers: 4\n";
  m.rng = {{"dropout", "42:17"}};
  m.shards = {{"stage-0.safetensors", 0, 1000, std::string(64, 'a'), {"wte.weight", "opt.m.wte.weight"}},
              {"stage-1.safetensors", 1, 2000, std::string(64, '0'), {"lm_head.weight"}}};
  return m;
}

std::string error_of(const std::string& text) {
  try {
    checkpoint::parse_manifest(text, "/ck/step-000123/manifest.json");
  } catch (const CheckpointError& e) {
    CHECK(e.path() == "/ck/step-000123/manifest.json");
    return e.what();
  }
  return "";
}

std::string with(const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j = nlohmann::json::parse(checkpoint::encode_manifest(sample()));
  edit(j);
  return j.dump();
}

TEST_CASE("checkpoint sha256 matches the FIPS 180-2 test vectors") {
  checkpoint::Sha256 abc;
  abc.update("abc", 3);
  CHECK(abc.hex_digest() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  checkpoint::Sha256 pieces;  // the same digest fed in pieces
  pieces.update("a", 1);
  pieces.update("bc", 2);
  CHECK(pieces.hex_digest() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  checkpoint::Sha256 empty;
  CHECK(empty.hex_digest() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST_CASE("a checkpoint manifest survives encoding and parsing unchanged") {
  const Manifest m = sample();
  CHECK(checkpoint::parse_manifest(checkpoint::encode_manifest(m), "m.json") == m);
}

TEST_CASE("a malformed checkpoint manifest is rejected naming the file and the field") {
  CHECK(error_of("{not json").find("not valid JSON") != std::string::npos);
  CHECK(error_of("[1, 2]").find("not a JSON object") != std::string::npos);
  CHECK(error_of(with([](auto& j) { j.erase("step"); })).find("field \"step\" is missing") != std::string::npos);
  CHECK(error_of(with([](auto& j) { j["step"] = -1; })).find("field \"step\" must be an integer") !=
        std::string::npos);
  CHECK(error_of(with([](auto& j) { j["format_version"] = 2; })).find("\"format_version\" is 2") !=
        std::string::npos);
  CHECK(error_of(with([](auto& j) { j["stages"] = 0; })).find("\"stages\" must be at least 1") !=
        std::string::npos);
  CHECK(error_of(with([](auto& j) { j["config"] = 5; })).find("\"config\" must be a string") != std::string::npos);
  CHECK(error_of(with([](auto& j) { j["shards"] = nlohmann::json::array(); })).find("\"shards\" is empty") !=
        std::string::npos);
  CHECK(error_of(with([](auto& j) { j["shards"][1]["sha256"] = "XYZ"; }))
            .find("\"shards[1].sha256\" must be 64 lowercase hex digits") != std::string::npos);
  CHECK(error_of(with([](auto& j) { j["shards"][0]["file"] = "../escape.safetensors"; }))
            .find("\"shards[0].file\" must be a plain file name") != std::string::npos);
  CHECK(error_of(with([](auto& j) { j["shards"][0]["file"] = ".stage-0.safetensors.tmp-1-2"; }))
            .find("\"shards[0].file\"") != std::string::npos);
  CHECK(error_of(with([](auto& j) { j["shards"][1]["file"] = "stage-0.safetensors"; }))
            .find("names \"stage-0.safetensors\" twice") != std::string::npos);
  CHECK(error_of(with([](auto& j) { j["shards"][1]["tensors"][0] = "wte.weight"; }))
            .find("names tensor \"wte.weight\" in two places") != std::string::npos);
  CHECK(error_of(with([](auto& j) { j["shards"][1]["stage"] = 2; }))
            .find("\"shards[1].stage\" is 2, not below \"stages\" (2)") != std::string::npos);
  CHECK(error_of(with([](auto& j) { j["shards"][1]["stage"] = 0; })).find("\"shards[1].stage\" repeats stage 0") !=
        std::string::npos);
  CHECK(error_of(with([](auto& j) { j["shards"][0].erase("bytes"); })).find("\"shards[0].bytes\" is missing") !=
        std::string::npos);
}

TEST_CASE("a checkpoint manifest whose fields contradict each other is rejected naming them") {
  CHECK(error_of(with([](auto& j) { j["optimizer_steps"] = 124; }))
            .find("field \"optimizer_steps\" is 124, more than \"step\" (123)") != std::string::npos);
  CHECK(error_of(with([](auto& j) { j["optimizer_steps"] = 1e18; })).find("\"optimizer_steps\"") != std::string::npos);
  CHECK(error_of(with([](auto& j) { j["partition"] = {3}; }))
            .find("field \"partition\" has 1 entries, not a multiple of \"stages\" (2)") != std::string::npos);
  CHECK(error_of(with([](auto& j) { j["stages"] = 1000000000; })).find("not a multiple of \"stages\" (1000000000)") !=
        std::string::npos);
  CHECK(error_of(with([](auto& j) { j["partition"] = {3, 0}; }))
            .find("field \"partition[1]\" is 0: every model stage holds at least half a block") != std::string::npos);
  // Two chunks per stage (interleaved, zbv): one entry per chunk, four for two stages.
  CHECK(error_of(with([](auto& j) { j["partition"] = {1, 1.5, 2, 0.5}; })).empty());
  CHECK(error_of(with([](auto& j) { j["optimizer_steps"] = 123; })).empty());  // no skipped step
}

}  // namespace
}  // namespace conveyor::testing
