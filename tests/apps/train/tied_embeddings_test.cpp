// `conveyor train` with model.tie_embeddings: the token embedding and the LM head share one
// weight. Each holder keeps a copy and their gradients are summed every step (fl(a + b)
// once per element, in place when one stage holds both copies, through a Gloo group of two
// between the first and the last stage otherwise), so the copies stay bitwise equal and
// the weights do not depend on the split: one stage, 2 stages (1F1B: the group) and 2
// stages ZBV (rank 0 holds both ends) end with the same bits.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <cstring>

#include "kernels/io/safetensors.hpp"
#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

// configs/tiny.yaml for 6 steps with `sets`; returns the run folder.
fs::path train_tiny(const TempDir& dir, const std::string& name, std::vector<std::string> sets) {
  const fs::path out = dir / name;
  std::vector<std::string> args = {"configs/tiny.yaml", "--out", out.string(), "--set",
                                   "train.steps=6", "--set", "train.eval_every=0", "--set",
                                   "fault.policy=abort"};
  for (auto& s : sets) args.insert(args.end(), {"--set", s});
  train_ok(args, 300);
  return out;
}

const Tensor& tensor_named(const std::vector<NamedTensor>& ts, const std::string& name) {
  for (const auto& t : ts)
    if (t.name == name) return t.tensor;
  FAIL("no tensor " << name);
  throw std::logic_error(name);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

double first_loss(const fs::path& run) {
  for (auto& row : read_jsonl(run / "metrics.jsonl"))
    if (row.contains("step") && !row.contains("event") && row.at("step") == 0) return row.at("loss");
  FAIL("no step 0 in " << run);
  return 0;
}

}  // namespace

TEST_CASE("tied embeddings: the copies stay equal and the weights are the same bits for 1 stage, 2 stages and ZBV") {
  TempDir dir;
  const auto one = train_tiny(dir, "one", {"model.tie_embeddings=true", "pipeline.stages=1"});
  const auto two = train_tiny(dir, "two", {"model.tie_embeddings=true", "pipeline.stages=2"});
  const auto zbv = train_tiny(dir, "zbv", {"model.tie_embeddings=true", "pipeline.stages=2",
                                           "pipeline.schedule=zbv"});
  const auto untied = train_tiny(dir, "untied", {"pipeline.stages=2"});
  const auto w_one = read_safetensors((one / "weights.safetensors").string());
  for (const auto& run : {two, zbv}) {
    CAPTURE(run);
    const auto w = read_safetensors((run / "weights.safetensors").string());
    REQUIRE(w.size() == w_one.size());
    for (std::size_t i = 0; i < w.size(); ++i) {
      CAPTURE(w[i].name);
      CHECK(w[i].name == w_one[i].name);
      CHECK(same_bits(w[i].tensor, w_one[i].tensor));
    }
  }
  // Trained, and still one tensor in two places.
  CHECK(same_bits(tensor_named(w_one, "wte.weight"), tensor_named(w_one, "lm_head.weight")));
  const auto w_untied = read_safetensors((untied / "weights.safetensors").string());
  CHECK_FALSE(same_bits(tensor_named(w_untied, "wte.weight"), tensor_named(w_untied, "lm_head.weight")));
  // Tying changes the model: the head starts as the embedding, so the first loss differs.
  CHECK(first_loss(one) != first_loss(untied));
}

TEST_CASE("tied embeddings with 2 replicas of 2 stages follow one replica's loss curve within 1e-6") {
  TempDir dir;
  const auto one = train_tiny(dir, "r1", {"model.tie_embeddings=true", "pipeline.stages=2"});
  const auto two = train_tiny(dir, "r2", {"model.tie_embeddings=true", "pipeline.stages=2",
                                          "parallel.data=2"});
  std::vector<double> a, b;
  for (auto& row : read_jsonl(one / "metrics.jsonl"))
    if (row.contains("step") && !row.contains("event")) a.push_back(row.at("loss"));
  for (auto& row : read_jsonl(two / "metrics.jsonl"))
    if (row.contains("step") && !row.contains("event")) b.push_back(row.at("loss"));
  REQUIRE(a.size() == 6);
  REQUIRE(b.size() == 6);
  for (std::size_t s = 0; s < a.size(); ++s) {
    CAPTURE(s);
    CHECK(std::fabs(a[s] - b[s]) / std::fabs(a[s]) <= 1e-6);
  }
  const auto w = read_safetensors((two / "weights.safetensors").string());
  CHECK(same_bits(tensor_named(w, "wte.weight"), tensor_named(w, "lm_head.weight")));
}

TEST_CASE("tied embeddings held by one stage recover from a stage restart to the same bits") {
  TempDir dir;
  const auto clean = train_tiny(dir, "clean", {"model.tie_embeddings=true", "pipeline.stages=1"});
  const auto crashed = train_tiny(dir, "crashed", {"model.tie_embeddings=true", "pipeline.stages=1",
                                                   "fault.policy=restart",
                                                   "fault.inject=[crash:stage=0:step=3]"});
  std::size_t recoveries = 0;
  for (auto& row : read_jsonl(crashed / "metrics.jsonl"))
    if (row.value("event", "") == "recovery") ++recoveries;
  CHECK(recoveries == 1);
  CHECK(read_text(clean / "weights.safetensors") == read_text(crashed / "weights.safetensors"));
}

// Across stages the holders sum through a group of two, left by both on every recovery
// and joined again by generation with the stage groups: a crash of either holder (and,
// with 2 replicas, a replica restored from its twin), a crash inside the optimizer step
// and a NaN rollback each end with the fault-free bits.
TEST_CASE("tied embeddings across stages recover from restarts to the same bits, with 1 and 2 replicas") {
  TempDir dir;
  struct Case {
    std::string name;
    std::vector<std::string> sets;
    std::string restored_from;
  };
  const std::vector<std::string> tied{"model.tie_embeddings=true", "pipeline.stages=2",
                                      "fault.policy=restart", "fault.on_nan=rollback"};
  const std::vector<Case> cases = {
      {"head holder", {"fault.inject=[crash:stage=1:step=3]"}, "snapshot"},
      {"embedding holder in the optimizer step",
       {"fault.inject=[crash:stage=0:step=2:when=optimizer]"}, "snapshot"},
      {"replica 1's head holder", {"parallel.data=2", "fault.inject=[crash:stage=3:step=3]"},
       "replica 0"},
      {"NaN with replicas", {"parallel.data=2", "fault.inject=[nan:stage=1:step=2]"}, "kept"}};
  std::map<bool, std::string> clean;  // by replicas > 1
  for (const bool replicated : {false, true}) {
    auto sets = tied;
    if (replicated) sets.push_back("parallel.data=2");
    clean[replicated] =
        read_text(train_tiny(dir, replicated ? "clean2" : "clean1", sets) / "weights.safetensors");
  }
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto sets = tied;
    sets.insert(sets.end(), c.sets.begin(), c.sets.end());
    const bool replicated = std::find(sets.begin(), sets.end(), "parallel.data=2") != sets.end();
    std::string name = c.name;
    std::replace(name.begin(), name.end(), ' ', '-');
    const auto run = train_tiny(dir, name, sets);
    std::vector<std::string> from;
    for (auto& row : read_jsonl(run / "metrics.jsonl"))
      if (row.value("event", "") == "recovery") from.push_back(row.at("restored_from"));
    CHECK(from == std::vector<std::string>{c.restored_from});
    CHECK(read_text(run / "weights.safetensors") == clean.at(replicated));
  }
}
