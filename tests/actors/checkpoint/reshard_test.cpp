#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include "actors/checkpoint/checkpoint_writer.hpp"
#include "actors/checkpoint/reader.hpp"
#include "actors/checkpoint/reshard.hpp"
#include "actors/checkpoint/stage_state.hpp"
#include "actors/checkpoint/tensor_names.hpp"
#include "kernels/model/gpt_stage.hpp"
#include "tests/actors/checkpoint/checkpoint_test_support.hpp"

namespace conveyor::testing {
namespace {

using checkpoint::posix_filesystem;

GptConfig tiny_gpt(std::int64_t layers = 4, std::int64_t d_model = 16) {
  GptConfig c;
  c.layers = layers;
  c.d_model = d_model;
  c.heads = 2;
  c.seq_len = 8;
  c.vocab = 32;
  return c;
}

// One GptStage per entry of `blocks` (blocks per stage), the embedding on the first and
// the head on the last, as the runtime splits the model.
struct Pipeline {
  std::vector<GptStage> stages;
  std::vector<AdamWState> optim;
};

Pipeline make_pipeline(const GptConfig& config, const std::vector<int>& blocks, std::uint64_t seed) {
  Pipeline p;
  int first = 0;
  for (std::size_t k = 0; k < blocks.size(); ++k) {
    StageSlice s{first, blocks[k], k == 0, k + 1 == blocks.size()};
    p.stages.emplace_back(config, s, seed);
    p.optim.emplace_back();
    first += blocks[k];
  }
  return p;
}

// One AdamW step with made-up gradients, so weights and both moments are non-trivial.
void train_one_step(Pipeline& p) {
  for (std::size_t k = 0; k < p.stages.size(); ++k) {
    for (auto& param : p.stages[k].params()) {
      auto g = param.grad.f32_span();
      for (std::size_t i = 0; i < g.size(); ++i) g[i] = std::sin(0.37f * static_cast<float>(i) + param.value.f32()[0]);
    }
    adamw_step(p.stages[k].params(), p.optim[k], AdamWConfig{}, 1e-2f, 1.0f);
  }
}

checkpoint::Snapshot snapshot_of(const Pipeline& p, std::int64_t step) {
  checkpoint::Snapshot s;
  s.manifest.step = step;
  s.manifest.optimizer_steps = p.optim.front().t;
  s.manifest.stages = static_cast<int>(p.stages.size());
  for (std::size_t k = 0; k < p.stages.size(); ++k) {
    s.manifest.partition_halves.push_back(p.stages[k].slice().num_halves());
    s.shards.push_back({static_cast<int>(k), checkpoint::capture_stage_tensors(p.stages[k].params(), p.optim[k])});
  }
  return s;
}

std::vector<std::vector<checkpoint::TensorSpec>> specs_of(const Pipeline& p) {
  std::vector<std::vector<checkpoint::TensorSpec>> out;
  for (const auto& s : p.stages) out.push_back(checkpoint::specs_of(s.params()));
  return out;
}

// Every weight and moment of `from`, by global name, bit for bit.
std::map<std::string, Tensor> state_by_name(const Pipeline& p) {
  std::map<std::string, Tensor> out;
  for (std::size_t k = 0; k < p.stages.size(); ++k) {
    const auto& params = p.stages[k].params();
    for (std::size_t i = 0; i < params.size(); ++i) {
      out[params[i].name] = params[i].value;
      out[checkpoint::opt_m_name(params[i].name)] = p.optim[k].m[i];
      out[checkpoint::opt_v_name(params[i].name)] = p.optim[k].v[i];
    }
  }
  return out;
}

void check_reshard(const std::vector<int>& from_blocks, const std::vector<int>& to_blocks) {
  ScratchDir dir("reshard");
  Pipeline from = make_pipeline(tiny_gpt(), from_blocks, 1);
  train_one_step(from);
  checkpoint::write_checkpoint(posix_filesystem(), dir.path(), snapshot_of(from, 1), 1);
  const auto loaded = checkpoint::load_checkpoint(posix_filesystem(), dir / "step-000001");

  Pipeline to = make_pipeline(tiny_gpt(), to_blocks, 2);  // another seed: every value differs
  const auto per_stage = checkpoint::reshard(loaded.tensors, specs_of(to), loaded.path);
  REQUIRE(per_stage.size() == to_blocks.size());
  for (std::size_t k = 0; k < to.stages.size(); ++k) {
    CHECK(per_stage[k].size() == 3 * to.stages[k].params().size());
    checkpoint::restore_stage_tensors(per_stage[k], to.stages[k].params(), to.optim[k], loaded.manifest.optimizer_steps,
                                      loaded.path);
    CHECK(to.optim[k].t == 1);
  }
  const auto want = state_by_name(from);
  const auto got = state_by_name(to);
  REQUIRE(got.size() == want.size());
  for (const auto& [name, t] : want) {
    CAPTURE(name);
    REQUIRE(got.count(name));
    CHECK(got.at(name).shape() == t.shape());
    CHECK(std::memcmp(got.at(name).raw(), t.raw(), t.bytes()) == 0);
  }
}

std::string reshard_error(const std::map<std::string, Tensor>& tensors, const Pipeline& to) {
  try {
    checkpoint::reshard(tensors, specs_of(to), "/ck/step-000001");
  } catch (const checkpoint::CheckpointError& e) {
    CHECK(e.path() == "/ck/step-000001");
    return e.what();
  }
  return "";
}

TEST_CASE("a checkpoint of 4 stages loads into 2 stages with every weight and moment bit for bit") {
  check_reshard({1, 1, 1, 1}, {2, 2});
}

TEST_CASE("a checkpoint of 2 stages loads into 3 stages with every weight and moment bit for bit") {
  check_reshard({2, 2}, {2, 1, 1});
}

TEST_CASE("one new stage's tensors load alone: the other shards are checked by their headers, never opened for bytes") {
  ScratchDir dir("reshard_here");
  Pipeline from = make_pipeline(tiny_gpt(), {1, 1, 1, 1}, 1);
  train_one_step(from);
  checkpoint::write_checkpoint(posix_filesystem(), dir.path(), snapshot_of(from, 1), 1);
  const std::string step = dir / "step-000001";
  const auto manifest = checkpoint::verify_checkpoint(posix_filesystem(), step);
  const auto index = checkpoint::index_checkpoint(step, manifest);
  CHECK(index.tensors.size() == state_by_name(from).size());
  CHECK(index.tensors.at("wte.weight").shape == Shape{32, 16});

  // New stage 0 of two holds old stages 0 and 1: with shards 2 and 3 gone, it still loads.
  Pipeline to = make_pipeline(tiny_gpt(), {2, 2}, 2);
  const auto plan = checkpoint::plan_reshard(index.tensors, specs_of(to), step);
  REQUIRE(plan.size() == 2);
  std::filesystem::remove(dir / ("step-000001/" + manifest.shards[2].file));
  std::filesystem::remove(dir / ("step-000001/" + manifest.shards[3].file));
  const auto loaded = checkpoint::load_tensors(step, manifest, index, {plan[0].begin(), plan[0].end()});
  CHECK(loaded.size() == plan[0].size());
  const auto want = state_by_name(from);
  for (const auto& [name, t] : loaded) {
    CAPTURE(name);
    CHECK(std::memcmp(t.raw(), want.at(name).raw(), t.bytes()) == 0);
  }
  CHECK_THROWS_WITH_AS(checkpoint::load_tensors(step, manifest, index, {plan[1].begin(), plan[1].end()}),
                       doctest::Contains("shard cannot be read"), checkpoint::CheckpointError);
}

TEST_CASE("a shard whose header lists other tensors than the manifest is refused when indexed") {
  ScratchDir dir("reshard_index");
  Pipeline from = make_pipeline(tiny_gpt(), {2, 2}, 1);
  checkpoint::write_checkpoint(posix_filesystem(), dir.path(), snapshot_of(from, 0), 1);
  const std::string step = dir / "step-000000";
  auto manifest = checkpoint::verify_checkpoint(posix_filesystem(), step);
  std::swap(manifest.shards[0].tensors[0], manifest.shards[0].tensors[1]);
  CHECK_THROWS_WITH_AS(checkpoint::index_checkpoint(step, manifest),
                       doctest::Contains("tensors that differ from the"), checkpoint::CheckpointError);
}

TEST_CASE("resharding a checkpoint names missing and extra tensors and shape mismatches") {
  Pipeline from = make_pipeline(tiny_gpt(), {2, 2}, 1);
  train_one_step(from);
  const auto tensors = state_by_name(from);

  const std::string missing = reshard_error(tensors, make_pipeline(tiny_gpt(5), {3, 2}, 1));
  CHECK(missing.find("missing tensor blocks.4.attn.qkv.weight (new stage 1)") != std::string::npos);
  CHECK(missing.find("missing tensor opt.m.blocks.4.attn.qkv.weight (new stage 1)") != std::string::npos);

  const std::string extra = reshard_error(tensors, make_pipeline(tiny_gpt(3), {2, 1}, 1));
  CHECK(extra.find("extra tensor blocks.3.mlp.fc2.weight (no new stage holds it)") != std::string::npos);
  CHECK(extra.find("extra tensor blocks.3.ln2.bias") != std::string::npos);
  // 12 parameters of block 3, each with opt.m and opt.v: 36 problems, the first 20 listed.
  CHECK(extra.find("36 problem(s)") != std::string::npos);
  CHECK(extra.find("... (16 more)") != std::string::npos);

  const std::string shape = reshard_error(tensors, make_pipeline(tiny_gpt(4, 32), {2, 2}, 1));
  CHECK(shape.find("shape mismatch for wte.weight: checkpoint (32, 16), new stage 0 expects (32, 32)") !=
        std::string::npos);

  // Checkpoints hold f32: a tensor of another dtype (an edited or foreign shard) is refused
  // here, before any stage sees it.
  auto retyped = tensors;
  const Tensor& wte = tensors.at("wte.weight");
  retyped["wte.weight"] = Tensor::zeros(wte.shape(), DType::i32);
  retyped["opt.v.wte.weight"] = Tensor::zeros(wte.shape(), DType::bf16);
  const std::string dtype = reshard_error(retyped, make_pipeline(tiny_gpt(), {2, 2}, 1));
  CHECK(dtype.find("dtype mismatch for wte.weight: checkpoint i32, new stage 0 expects f32") != std::string::npos);
  CHECK(dtype.find("dtype mismatch for opt.v.wte.weight: checkpoint bf16, new stage 0 expects f32") !=
        std::string::npos);

  Pipeline overlapping = make_pipeline(tiny_gpt(), {2, 2}, 1);
  auto specs = specs_of(overlapping);
  specs[1].push_back(specs[0][0]);
  CHECK_THROWS_WITH_AS(checkpoint::reshard(tensors, specs, "x"),
                       doctest::Contains("parameter wte.weight asked for by new stages 0 and 1"),
                       checkpoint::CheckpointError);
}

TEST_CASE("restoring a stage from checkpoint tensors checks every tensor before changing any") {
  Pipeline p = make_pipeline(tiny_gpt(), {4}, 1);
  train_one_step(p);
  auto tensors = checkpoint::capture_stage_tensors(p.stages[0].params(), p.optim[0]);
  const Tensor before = p.stages[0].params()[0].value.clone();
  tensors.pop_back();  // drop the last parameter's opt.v
  Pipeline q = make_pipeline(tiny_gpt(), {4}, 2);
  const Tensor q_before = q.stages[0].params()[0].value.clone();
  CHECK_THROWS_WITH_AS(checkpoint::restore_stage_tensors(tensors, q.stages[0].params(), q.optim[0], 1, "here"),
                       doctest::Contains("here: missing tensor opt.v.lm_head.weight"), checkpoint::CheckpointError);
  CHECK(std::memcmp(q.stages[0].params()[0].value.raw(), q_before.raw(), q_before.bytes()) == 0);
  CHECK(std::memcmp(p.stages[0].params()[0].value.raw(), before.raw(), before.bytes()) == 0);
}

}  // namespace
}  // namespace conveyor::testing
