// The default job (`conveyor train`, configs/tiny.yaml: a tiny byte-level GPT on the
// shipped corpus, 4 stages, 1F1B) learns: its held-out loss ends well below the corpus'
// unigram entropy, the loss of the best model that ignores context. Takes 20-60 s.
#include <doctest/doctest.h>

#include <string>

#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor::testing;

TEST_CASE("the default job ends with a val_loss at least 0.5 nats below the unigram entropy") {
  TempDir dir;
  const fs::path out = dir.path() / "run";
  const CommandResult r = train_ok({"--out", out.string()}, 300);
  CHECK(r.out.empty());

  const auto rows = read_jsonl(out / "metrics.jsonl");
  REQUIRE_FALSE(rows.empty());
  const auto& summary = rows.back();
  REQUIRE(summary.value("event", "") == "summary");
  const double entropy = summary.at("unigram_entropy").get<double>();
  const double val_loss = summary.at("final_val_loss").get<double>();

  const nlohmann::json* last_eval = nullptr;
  for (const auto& row : rows)
    if (row.value("event", "") == "eval") last_eval = &row;
  REQUIRE(last_eval != nullptr);
  CHECK(last_eval->at("val_loss").get<double>() == val_loss);
  CHECK(last_eval->at("after_step").get<int>() == summary.at("steps").get<int>() - 1);

  INFO("final val_loss " << val_loss << ", unigram entropy " << entropy);
  CHECK(entropy > 2.0);  // English bytes: about 3 nats; guards against a degenerate corpus
  CHECK(val_loss < entropy - 0.5);
}
