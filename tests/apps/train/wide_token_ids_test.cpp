// `conveyor train` on token files of uint32 ids (data.token_bytes 4): a vocabulary above
// 65536 trains, and the width of the file changes nothing else: the same ids written as
// uint16 and as uint32 give the same batches, so the same weights bit for bit.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/io/safetensors.hpp"
#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

// Little-endian ids of `width` bytes each.
std::string ids_file(const std::vector<std::uint32_t>& ids, int width) {
  std::string s;
  for (auto id : ids)
    for (int b = 0; b < width; ++b) s += static_cast<char>((id >> (8 * b)) & 0xff);
  return s;
}

// A repeating phrase over `vocab` ids, its largest id vocab - 1.
std::vector<std::uint32_t> phrase_ids(std::size_t n, std::uint32_t vocab) {
  std::vector<std::uint32_t> ids(n);
  for (std::size_t i = 0; i < n; ++i) ids[i] = static_cast<std::uint32_t>((i * 7919 + i / 13) % vocab);
  ids[n / 2] = vocab - 1;
  return ids;
}

// 2 steps of a 2-layer model on 2 stages over `data` (data.format tokens); the run folder.
fs::path train_tokens(const TempDir& dir, const std::string& name, const std::string& data,
                      int token_bytes, std::int64_t vocab) {
  const fs::path out = dir / name;
  const std::vector<std::string> sets = {
      "data.path=" + data, "data.format=tokens", "data.token_bytes=" + std::to_string(token_bytes),
      "model.vocab=" + std::to_string(vocab), "model.layers=2", "model.d_model=32",
      "model.heads=2", "model.seq_len=16", "pipeline.stages=2", "pipeline.micro_batches=2",
      "pipeline.micro_batch_size=2", "train.steps=2", "train.eval_every=0", "train.eval_batches=1"};
  std::vector<std::string> args = {"configs/tiny.yaml", "--out", out.string()};
  for (const auto& s : sets) args.insert(args.end(), {"--set", s});
  train_ok(args, 300);
  return out;
}

}  // namespace

TEST_CASE("a uint32 token file with ids above 65535 trains with model.vocab 70001") {
  TempDir dir;
  const auto ids = phrase_ids(4000, 70001);
  const auto data = dir.write("wide.bin", ids_file(ids, 4));
  const auto run = train_tokens(dir, "wide", data, 4, 70001);
  CHECK(fs::exists(run / "weights.safetensors"));
}

TEST_CASE("the same ids as uint16 and as uint32 (data.token_bytes 4) train to the same weights bit for bit") {
  TempDir dir;
  const auto ids = phrase_ids(4000, 1000);
  const auto narrow = train_tokens(dir, "narrow", dir.write("narrow.bin", ids_file(ids, 2)), 2, 1000);
  const auto wide = train_tokens(dir, "wide", dir.write("wide.bin", ids_file(ids, 4)), 4, 1000);
  const auto a = read_safetensors((narrow / "weights.safetensors").string());
  const auto b = read_safetensors((wide / "weights.safetensors").string());
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].name);
    CHECK(a[i].name == b[i].name);
    REQUIRE(a[i].tensor.bytes() == b[i].tensor.bytes());
    CHECK(std::memcmp(a[i].tensor.raw(), b[i].tensor.raw(), a[i].tensor.bytes()) == 0);
  }
}

TEST_CASE("data.token_bytes 4 with a text corpus exits 2 naming the key") {
  const auto r = run_conveyor({"train", "configs/tiny.yaml", "--set", "data.token_bytes=4"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("data.token_bytes") != std::string::npos);
  CHECK(r.err.find("data.format text") != std::string::npos);
}

TEST_CASE("an llm.c version 2 header read with data.token_bytes 2 exits 2 naming both") {
  TempDir dir;
  std::vector<std::int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = 2;
  header[2] = 4000;
  const auto data = dir.write("v2.bin", std::string(reinterpret_cast<const char*>(header.data()), 1024) +
                                            ids_file(phrase_ids(4000, 1000), 4));
  const auto r = run_conveyor({"train", "configs/tiny.yaml", "--out", fs::path(dir / "run").string(), "--set",
                               "data.path=" + data, "--set", "data.format=tokens"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find(data) != std::string::npos);
  CHECK(r.err.find("llm.c header version 2 holds uint32 tokens") != std::string::npos);
  CHECK(r.err.find("data.token_bytes is 2") != std::string::npos);
}
