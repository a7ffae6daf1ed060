// optim.shard_state (ZeRO-1) with 2 replicas of a 2-stage pipeline on the CPU: each replica
// keeps half of every stage's AdamW state and the replicas all-gather the weights after
// each step. The run must be the unsharded run bit for bit (weights file, losses, the
// checkpoint's tensors, merged from both replicas' halves), survive a crash through the
// snapshot, and its checkpoint must resume into any number of replicas.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <utility>

#include "kernels/io/safetensors.hpp"
#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor::testing;

namespace {

// tiny.yaml, 2 stages, 6 steps, a checkpoint at steps 3 and 6, plus `sets`.
std::vector<std::string> job(const fs::path& out, std::vector<std::string> sets) {
  std::vector<std::string> args{"configs/tiny.yaml", "--set", "pipeline.stages=2",
                                "--set", "train.steps=6", "--set", "train.eval_every=0",
                                "--set", "checkpoint.every=3"};
  for (const auto& s : sets) args.insert(args.end(), {"--set", s});
  args.insert(args.end(), {"--out", out.string()});
  return args;
}

std::vector<double> losses(const fs::path& run) {
  std::vector<double> out;
  for (auto& row : read_jsonl(run / "metrics.jsonl"))
    if (row.contains("step") && !row.contains("event")) out.push_back(row.at("loss"));
  return out;
}

// Every tensor of the checkpoint's stage shards, by name.
std::map<std::string, conveyor::Tensor> checkpoint_tensors(const fs::path& step_dir) {
  std::map<std::string, conveyor::Tensor> out;
  for (const auto& entry : fs::directory_iterator(step_dir))
    if (entry.path().extension() == ".safetensors")
      for (auto& t : conveyor::read_safetensors(entry.path().string())) out[t.name] = t.tensor;
  return out;
}

void check_same_tensors(const fs::path& a, const fs::path& b) {
  const auto x = checkpoint_tensors(a), y = checkpoint_tensors(b);
  REQUIRE(x.size() == y.size());
  REQUIRE(x.size() > 0);
  int moments = 0;
  for (const auto& [name, tensor] : x) {
    CAPTURE(name);
    REQUIRE(y.count(name) == 1);
    const auto& other = y.at(name);
    REQUIRE(tensor.bytes() == other.bytes());
    CHECK(std::memcmp(tensor.raw(), other.raw(), tensor.bytes()) == 0);
    moments += name.rfind("opt.", 0) == 0;
  }
  CHECK(moments > 0);  // the moments are there, merged from both replicas
}

}  // namespace

TEST_CASE("optim.shard_state with 2 replicas trains bitwise as unsharded, its checkpoint merges both halves") {
  TempDir dir;
  // fault.policy abort: the checkpoint is asked of all four stage actors; restart (the
  // default): taken from their in-memory snapshots. Both merge the halves.
  for (const char* policy : {"abort", "restart"}) {
    CAPTURE(policy);
    const std::string p = policy;
    train_ok(job(dir / ("whole-" + p), {"parallel.data=2", "fault.policy=" + p}), 120);
    train_ok(job(dir / ("sharded-" + p),
                 {"parallel.data=2", "fault.policy=" + p, "optim.shard_state=true"}),
             120);
    const fs::path whole = dir.path() / ("whole-" + p), sharded = dir.path() / ("sharded-" + p);
    CHECK(read_text(sharded / "weights.safetensors") == read_text(whole / "weights.safetensors"));
    const auto a = losses(whole), b = losses(sharded);
    REQUIRE(a.size() == 6);
    CHECK(a == b);
    // The sharded run reports what the weights' all-gather cost; the unsharded one has none.
    for (auto& row : read_jsonl(sharded / "metrics.jsonl"))
      if (row.contains("step") && !row.contains("event"))
        CHECK(row.at("allgather_ms").get<double>() > 0.0);
    for (auto& row : read_jsonl(whole / "metrics.jsonl")) CHECK_FALSE(row.contains("allgather_ms"));
    for (const char* step : {"step-000003", "step-000006"}) {
      CAPTURE(step);
      check_same_tensors(whole / "checkpoints" / step, sharded / "checkpoints" / step);
    }
  }
}

TEST_CASE("optim.shard_state: a crashed replica restores its half from its snapshot, bitwise identical") {
  TempDir dir;
  train_ok(job(dir / "clean", {"parallel.data=2", "optim.shard_state=true"}), 120);
  // Actor 3 is replica 1's stage 1: outside the optimizer step (a twin could not give it
  // its half of the moments) and inside it.
  const std::pair<std::string, std::string> faults[] = {
      {"outside", "crash:stage=3:step=2"}, {"inside", "crash:stage=2:step=4:when=optimizer"}};
  for (const auto& [name, fault] : faults) {
    CAPTURE(fault);
    train_ok(job(dir / name,
                 {"parallel.data=2", "optim.shard_state=true", "fault.inject=[" + fault + "]"}),
             120);
    CHECK(read_text(dir.path() / name / "weights.safetensors") ==
          read_text(dir.path() / "clean" / "weights.safetensors"));
    std::vector<nlohmann::json> rows;
    for (auto& row : read_jsonl(dir.path() / name / "metrics.jsonl"))
      if (row.value("event", "") == "recovery") rows.push_back(row);
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].at("restored_from") == "snapshot");
  }
}

TEST_CASE("a checkpoint of sharded replicas resumes into one replica and into sharded replicas") {
  TempDir dir;
  train_ok(job(dir / "sharded", {"parallel.data=2", "optim.shard_state=true"}), 120);
  train_ok(job(dir / "whole", {"parallel.data=2"}), 120);
  const std::string from = (dir.path() / "sharded" / "checkpoints" / "step-000003").string();
  auto resumed = [&](const char* name, std::vector<std::string> sets) {
    auto args = job(dir / name, std::move(sets));
    args.insert(args.end(), {"--resume", from});
    train_ok(args, 120);
  };
  // Into sharded replicas again: the unsharded run's weights, bit for bit.
  resumed("again", {"parallel.data=2", "optim.shard_state=true"});
  CHECK(read_text(dir.path() / "again" / "weights.safetensors") ==
        read_text(dir.path() / "whole" / "weights.safetensors"));
  // Into one replica: the same run up to the rounding of the gradient average.
  resumed("one", {});
  const auto a = losses(dir.path() / "whole"), b = losses(dir.path() / "one");
  REQUIRE(a.size() == 6);
  REQUIRE(b.size() >= 3);
  const double last_a = a.back(), last_b = b.back();
  CHECK(std::fabs(last_a - last_b) / last_a <= 1e-6);
}
