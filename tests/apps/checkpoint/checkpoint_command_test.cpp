// `conveyor checkpoint verify` and `export` through the real binary: every checkpoint of a
// run reported (intact, corrupt with the shard named, incomplete), exit 1 when one fails;
// the export of a run's last checkpoint is its weights.safetensors byte for byte, for 1F1B
// and for ZBV (two model stages per shard, so model order is not shard order).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "kernels/io/safetensors.hpp"
#include "kernels/tensor/bf16.hpp"
#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor::testing;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// tiny.yaml for 4 steps on 2 stages, checkpoints at steps 2 and 4.
fs::path run_with_checkpoints(const TempDir& dir, const std::string& name, std::vector<std::string> sets = {}) {
  sets.insert(sets.end(), {"checkpoint.every=2", "checkpoint.keep=3"});
  return train_tiny_two_stages(dir, name, sets);
}

}  // namespace

TEST_CASE("checkpoint verify lists every checkpoint newest first, a flipped byte fails it, naming the shard") {
  TempDir dir;
  const fs::path run = run_with_checkpoints(dir, "run");
  auto r = run_conveyor({"checkpoint", "verify", run.string()});
  CHECK(r.exit_code == 0);
  const auto lines = split_lines(r.out);
  REQUIRE(lines.size() == 3);
  CHECK(contains(lines[0], "step-000004  ok: step 4"));
  CHECK(contains(lines[1], "step-000002  ok: step 2"));
  CHECK(lines[2] == "2 checkpoint(s): 2 intact, 0 failed verification, 0 incomplete");

  // A step folder alone; then JSON, alone on stdout.
  r = run_conveyor({"checkpoint", "verify", (run / "checkpoints/step-000002").string(), "--format", "json"});
  CHECK(r.exit_code == 0);
  auto json = nlohmann::json::parse(r.out);
  CHECK(json.at("ok") == true);
  REQUIRE(json.at("checkpoints").size() == 1);
  const auto& c = json.at("checkpoints")[0];
  CHECK(c.at("step") == 2);
  CHECK(c.at("shards") == 2);
  CHECK(c.at("schedule") == "1f1b");
  CHECK(c.at("parameters").get<std::uint64_t>() > 100000);
  CHECK(c.at("tensors") == 3 * 53);  // 2 embedding, 4 x 12 block, 3 head weights; opt.m and opt.v of each

  // Corrupt the newest: verify says which shard and exits 1; an unfinished write is listed.
  const fs::path shard = run / "checkpoints/step-000004/stage-1.safetensors";
  std::string bytes = read_text(shard);
  bytes[bytes.size() - 3] ^= 0x40;
  std::ofstream(shard, std::ios::binary | std::ios::trunc) << bytes;
  fs::create_directories(run / "checkpoints/step-000006");
  r = run_conveyor({"checkpoint", "verify", run.string(), "--format", "json"});
  CHECK(r.exit_code == 1);
  json = nlohmann::json::parse(r.out);
  CHECK(json.at("ok") == false);
  REQUIRE(json.at("checkpoints").size() == 3);
  CHECK(json.at("checkpoints")[0].at("complete") == false);
  CHECK(json.at("checkpoints")[1].at("ok") == false);
  CHECK(contains(json.at("checkpoints")[1].at("error").get<std::string>(), "stage-1.safetensors: shard's sha256"));
  CHECK(json.at("checkpoints")[2].at("ok") == true);

  r = run_conveyor({"checkpoint", "verify", dir / "nothing"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "no such folder"));
  CHECK(r.out.empty());
}

TEST_CASE("checkpoint export of a run's last checkpoint is its weights.safetensors byte for byte (1F1B and ZBV)") {
  TempDir dir;
  for (const std::string schedule : {"1f1b", "zbv"}) {
    CAPTURE(schedule);
    const fs::path run = run_with_checkpoints(dir, "run-" + schedule, {"pipeline.schedule=" + schedule});
    const std::string out = dir / ("w-" + schedule + ".safetensors");
    auto r = run_conveyor({"checkpoint", "export", run.string(), "--out", out, "--format", "json"});
    REQUIRE(r.exit_code == 0);
    const auto json = nlohmann::json::parse(r.out);
    CHECK(json.at("step") == 4);
    CHECK(json.at("tensors") == 53);
    CHECK(read_text(out) == read_text(run / "weights.safetensors"));

    // An existing --out is refused unless --force; the older checkpoint differs.
    r = run_conveyor({"checkpoint", "export", (run / "checkpoints/step-000002").string(), "--out", out});
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "already exists (--force replaces it)"));
    r = run_conveyor({"checkpoint", "export", (run / "checkpoints/step-000002").string(), "--out", out,
                      "--force"});
    CHECK(r.exit_code == 0);
    CHECK(read_text(out) != read_text(run / "weights.safetensors"));

    // Nothing is ever written into a checkpoint's folder, not even with --force.
    const fs::path manifest = run / "checkpoints/step-000004/manifest.json";
    const std::string before = read_text(manifest);
    r = run_conveyor({"checkpoint", "export", run.string(), "--out", manifest.string(), "--force"});
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "is inside the checkpoint"));
    CHECK(read_text(manifest) == before);
  }
}

TEST_CASE("checkpoint export --dtype bf16 rounds every weight to nearest even, half the bytes") {
  TempDir dir;
  const fs::path run = run_with_checkpoints(dir, "run");
  const std::string f32 = dir / "w32.safetensors", bf16 = dir / "w16.safetensors";
  REQUIRE(run_conveyor({"checkpoint", "export", run.string(), "--out", f32}).exit_code == 0);
  auto r = run_conveyor({"checkpoint", "export", run.string(), "--out", bf16, "--dtype", "bf16", "--format", "json"});
  REQUIRE(r.exit_code == 0);
  CHECK(nlohmann::json::parse(r.out).at("dtype") == "bf16");
  const auto wide = conveyor::read_safetensors(f32);
  const auto narrow = conveyor::read_safetensors(bf16);
  REQUIRE(wide.size() == narrow.size());
  std::size_t rounded = 0;
  for (std::size_t i = 0; i < wide.size(); ++i) {
    CAPTURE(wide[i].name);
    CHECK(narrow[i].name == wide[i].name);
    REQUIRE(narrow[i].tensor.dtype() == conveyor::DType::bf16);
    CHECK(narrow[i].tensor.shape() == wide[i].tensor.shape());
    const auto* bits = static_cast<const std::uint16_t*>(narrow[i].tensor.raw());
    for (std::int64_t j = 0; j < wide[i].tensor.numel(); ++j) {
      const float v = wide[i].tensor.f32()[j];
      if (bits[j] != conveyor::float_to_bf16_bits(v)) FAIL_CHECK("element " << j);
      rounded += conveyor::bf16_bits_to_float(bits[j]) != v;
    }
  }
  CHECK(rounded > 0);  // trained weights are not all bf16 values already
  CHECK(fs::file_size(bf16) < fs::file_size(f32) / 2 + 8192);
  r = run_conveyor({"checkpoint", "export", run.string(), "--out", bf16, "--dtype", "fp8"});
  CHECK(r.exit_code == 2);
}

TEST_CASE("checkpoint export writes into no checkpoint's folder, the one exported or any other") {
  TempDir dir;
  const fs::path run = run_with_checkpoints(dir, "run");
  // Another checkpoint's shard, with --force: refused, and that checkpoint still verifies.
  const fs::path shard = run / "checkpoints/step-000002/stage-0.safetensors";
  const std::string before = read_text(shard);
  auto r = run_conveyor({"checkpoint", "export", (run / "checkpoints/step-000004").string(), "--out", shard.string(),
                         "--force"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "is inside the checkpoint folder " + (run / "checkpoints/step-000002").string()));
  CHECK(read_text(shard) == before);
  CHECK(run_conveyor({"checkpoint", "verify", run.string()}).exit_code == 0);
  // A new file in another checkpoint's folder, or below it, reached through a link.
  fs::create_directory_symlink(run / "checkpoints/step-000002", dir.path() / "link");
  for (const fs::path& out : {run / "checkpoints/step-000002/new.safetensors", dir.path() / "link/x.safetensors"}) {
    CAPTURE(out);
    r = run_conveyor({"checkpoint", "export", run.string(), "--out", out.string()});
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "is inside the checkpoint folder"));
    CHECK_FALSE(fs::exists(out));
  }
  // Beside the checkpoints, in their checkpoint.dir: allowed.
  r = run_conveyor({"checkpoint", "export", run.string(), "--out", (run / "checkpoints/w.safetensors").string()});
  CHECK(r.exit_code == 0);
}
