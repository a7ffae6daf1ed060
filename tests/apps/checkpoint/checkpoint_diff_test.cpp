// `conveyor checkpoint diff` through the real binary: two runs of one config and seed are
// bitwise identical (exit 0); another seed differs in every weight and moment (exit 1,
// each tensor with its count and largest gap); a checkpoint against a weights file compares
// weights only; other shapes and missing tensors are named; a bad side is exit 2.
#include <doctest/doctest.h>

#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor::testing;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

fs::path run(const TempDir& dir, const std::string& name, std::vector<std::string> sets = {}) {
  sets.push_back("checkpoint.every=4");
  return train_tiny_two_stages(dir, name, sets);
}

}  // namespace

TEST_CASE("checkpoint diff: same seed identical, another seed differs tensor by tensor") {
  TempDir dir;
  const fs::path a = run(dir, "a"), b = run(dir, "b"), c = run(dir, "c", {"train.seed=99"});

  auto r = run_conveyor({"checkpoint", "diff", a.string(), b.string()});
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "(step 4)"));
  CHECK(contains(r.out, "identical: all 159 tensors bitwise equal"));  // 53 weights, opt.m, opt.v

  r = run_conveyor({"checkpoint", "diff", a.string(), c.string(), "--format", "json"});
  CHECK(r.exit_code == 1);
  const auto json = nlohmann::json::parse(r.out);
  CHECK(json.at("identical") == false);
  CHECK(json.at("weights_only") == false);
  CHECK(json.at("tensors") == 159);
  const auto& diffs = json.at("differences");
  CHECK(diffs.size() > 100);
  for (const auto& d : diffs) {
    CAPTURE(d.dump());
    CHECK(d.at("kind") == "values");
    CHECK(d.at("elements").get<std::int64_t>() > 0);
    CHECK(d.at("elements").get<std::int64_t>() <= d.at("of").get<std::int64_t>());
    CHECK(d.at("max_abs").get<double>() > 0);
  }
  CHECK(diffs[0].at("name") == "wte.weight");  // A's order: the first shard's first tensor

  // Against a weights file: weights only, and the run's last checkpoint is its weights.
  r = run_conveyor({"checkpoint", "diff", a.string(), (a / "weights.safetensors").string()});
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "weights only"));
  CHECK(contains(r.out, "identical: all 53 tensors bitwise equal"));
}

TEST_CASE("checkpoint diff names other shapes and tensors one side lacks, a bad side is exit 2") {
  TempDir dir;
  const fs::path a = run(dir, "a"), wide = run(dir, "wide", {"model.d_model=96"}),
                 deep = run(dir, "deep", {"model.layers=5"});
  auto r = run_conveyor({"checkpoint", "diff", (a / "weights.safetensors").string(),
                         (wide / "weights.safetensors").string()});
  CHECK(r.exit_code == 1);
  CHECK(contains(r.out, "wte.weight: shape (256, 64) in A, (256, 96) in B"));
  r = run_conveyor({"checkpoint", "diff", a.string(), deep.string(), "--format", "json"});
  CHECK(r.exit_code == 1);
  std::map<std::string, std::string> kinds;
  const auto deeper = nlohmann::json::parse(r.out);  // held: a range over a temporary's member dangles
  for (const auto& d : deeper.at("differences"))
    kinds[d.at("name").get<std::string>()] = d.at("kind").get<std::string>();
  CHECK(kinds["blocks.4.mlp.fc2.weight"] == "only in B");
  CHECK(kinds["opt.v.blocks.4.ln1.bias"] == "only in B");

  r = run_conveyor({"checkpoint", "diff", a.string(), dir / "missing"});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "checkpoint diff B"));
  CHECK(r.out.empty());
}
