// A manifest's partition must be the one its shards' tensors were cut by: a manifest that
// says otherwise is a failed verification (resume falls back past it), naming the
// manifest, the stage, its shard and the tensor.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "actors/checkpoint/checkpoint_writer.hpp"
#include "actors/checkpoint/partition_check.hpp"
#include "actors/checkpoint/reader.hpp"
#include "actors/checkpoint/resume.hpp"
#include "tests/actors/checkpoint/checkpoint_test_support.hpp"

namespace conveyor::testing {
namespace {

using checkpoint::CheckpointError;
using checkpoint::posix_filesystem;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string partition_error(const checkpoint::Manifest& m) {
  try {
    checkpoint::check_partition_against_shards(m, "ckpt/manifest.json");
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

// The tensor names a GptStage holding `blocks` (whole blocks) has, with their AdamW moments.
std::vector<std::string> stage_tensors(std::vector<int> blocks, bool embedding, bool head) {
  std::vector<std::string> params;
  if (embedding) params = {"wte.weight", "wpe.weight"};
  for (int b : blocks)
    for (const char* p : {"ln1.weight", "attn.qkv.weight", "attn.proj.bias", "ln2.bias", "mlp.fc1.weight",
                          "mlp.fc2.bias"})
      params.push_back("blocks." + std::to_string(b) + "." + p);
  if (head) params.insert(params.end(), {"ln_f.weight", "lm_head.weight"});
  std::vector<std::string> out;
  for (const auto& p : params) out.insert(out.end(), {p, "opt.m." + p, "opt.v." + p});
  return out;
}

checkpoint::Manifest manifest_of(const std::string& schedule, std::vector<std::int64_t> halves,
                                 std::vector<std::vector<std::string>> shards) {
  checkpoint::Manifest m;
  m.schedule = schedule;
  m.stages = static_cast<int>(shards.size());
  m.partition_halves = std::move(halves);
  for (int k = 0; k < m.stages; ++k)
    m.shards.push_back({"stage-" + std::to_string(k) + ".safetensors", k, 1, std::string(64, '0'),
                        shards[static_cast<std::size_t>(k)]});
  return m;
}

TEST_CASE("a checkpoint whose manifest partition disagrees with its shards fails verification and resume falls back") {
  ScratchDir dir("partition");
  for (std::int64_t step : {10, 20}) {
    auto snapshot = small_snapshot(step);  // stage k holds block k's MLP half: partition [1, 1]
    if (step == 20) snapshot.manifest.partition_halves = {1, 3};  // [0.5, 1.5]: block 0's MLP half on stage 1
    checkpoint::write_checkpoint(posix_filesystem(), dir.path(), snapshot, 5);
  }
  std::string error;
  try {
    checkpoint::verify_checkpoint(posix_filesystem(), dir / "step-000020");
  } catch (const CheckpointError& e) {
    error = e.what();
  }
  CAPTURE(error);
  CHECK(contains(error, dir / "step-000020/manifest.json: partition [0.5, 1.5]"));
  CHECK(contains(error, "stage 0's shard stage-0.safetensors holds blocks.0.mlp.fc1.weight (block 0's MLP half)"));
  CHECK(contains(error, "the partition gives stage 0 blocks [0, 0.5)"));

  const auto resume = checkpoint::resolve_resume(posix_filesystem(), "latest", dir.path());
  CHECK(resume.path == dir / "step-000010");
  REQUIRE(resume.skipped.size() == 1);
  CHECK(contains(resume.skipped[0], "partition [0.5, 1.5]"));
  CHECK(contains(resume.description, "skipped a newer checkpoint that failed verification"));
}

TEST_CASE("a manifest partition that counts more blocks than its shards hold is refused") {
  // 2 stages of 1 block each, but the partition says 1 + 2.
  const auto m = manifest_of("1f1b", {2, 4}, {stage_tensors({0}, true, false), stage_tensors({1}, false, true)});
  const std::string error = partition_error(m);
  CHECK(contains(error, "ckpt/manifest.json: partition [1, 2] (blocks per model stage) does not match the shards"));
  CHECK(contains(error, "it counts 3 blocks, the shards hold blocks 0 to 1 (2)"));
}

TEST_CASE("a manifest partition must put the embedding and the head on the stages whose shards hold them") {
  // The head's tensors on stage 0 of two.
  auto m = manifest_of("1f1b", {2, 2}, {stage_tensors({0}, true, true), stage_tensors({1}, false, false)});
  CHECK(contains(partition_error(m), "stage 0's shard stage-0.safetensors holds ln_f.weight (the LM head)"));
  m = manifest_of("1f1b", {2, 2}, {stage_tensors({0}, false, false), stage_tensors({1}, true, true)});
  CHECK(contains(partition_error(m), "stage 1's shard stage-1.safetensors holds wte.weight (the embedding)"));
}

TEST_CASE("manifest partitions of whole, half-block, interleaved and zbv pipelines agree with their shards") {
  // 1F1B over 2 stages of 1 and 3 blocks.
  CHECK(partition_error(manifest_of("1f1b", {2, 6},
                                    {stage_tensors({0}, true, false), stage_tensors({1, 2, 3}, false, true)})) == "");
  // A cut inside block 1: stage 0 holds its attention half, stage 1 its MLP half.
  std::vector<std::string> first = stage_tensors({0}, true, false), second = stage_tensors({}, false, true);
  first.insert(first.end(), {"blocks.1.ln1.weight", "opt.m.blocks.1.attn.qkv.weight"});
  second.insert(second.end(), {"blocks.1.ln2.weight", "master.blocks.1.mlp.fc1.weight"});
  CHECK(partition_error(manifest_of("1f1b", {3, 1}, {first, second})) == "");
  // Interleaved, 2 stages × 2 chunks: stage 0 holds model stages 0 and 2, stage 1 holds 1 and 3.
  CHECK(partition_error(manifest_of("interleaved-1f1b", {2, 2, 2, 2},
                                    {stage_tensors({0, 2}, true, false), stage_tensors({1, 3}, false, true)})) == "");
  // zbv's V: stage 0 holds model stages 0 and 3 (the embedding and the head), stage 1 holds 1 and 2.
  CHECK(partition_error(manifest_of("zbv", {2, 2, 2, 2},
                                    {stage_tensors({0, 3}, true, true), stage_tensors({1, 2}, false, false)})) == "");
  // The same shards read as interleaved are refused: block 3 is stage 1's there.
  CHECK(contains(partition_error(manifest_of("interleaved-1f1b", {2, 2, 2, 2},
                                             {stage_tensors({0, 3}, true, true), stage_tensors({1, 2}, false, false)})),
                 "stage 0's shard stage-0.safetensors holds blocks.3.ln1.weight (block 3's attention half), but "
                 "the partition gives stage 0 blocks [0, 1) and [2, 3) and the embedding"));
  // zbv with one entry per stage cannot say where its second chunks are.
  CHECK(contains(partition_error(manifest_of("zbv", {4, 4}, {stage_tensors({0, 3}, true, true),
                                                           stage_tensors({1, 2}, false, false)})),
                 "partition [2, 2] has 2 entries for 2 stages, but zbv runs 2 chunks per stage (4 entries)"));
}

}  // namespace
}  // namespace conveyor::testing
