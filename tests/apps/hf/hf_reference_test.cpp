// conveyor against transformers itself, without transformers: tests/data/hf_reference/
// holds small Hugging Face folders with transformers' own logits and loss on given tokens,
// written on a machine that has it by `scripts/hf_reference_check.py --write-fixture`
// (its README.md says with which versions). Each case is imported and scored by
// apps/hf/checkpoint_logits.hpp and must agree under the script's tolerances:
//   logits  max|conveyor - transformers| / max|transformers| <= 1e-4
//   loss    |conveyor - transformers| / |transformers|        <= 1e-5
// A case is a folder <case>/ holding hf/ (config.json, model.safetensors, as saved),
// reference.safetensors ("tokens" i32 (B, T + 1); "logits" f32 (b, T, V) of the first
// b <= B rows) and reference.json ({"loss": transformers' mean over the B*T positions}).
// Both cases (a grouped-query Llama with llama3 rope scaling, a GPT-2) must be there: the
// fixture is part of the repository.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "apps/hf/checkpoint_logits.hpp"
#include "apps/hf/hf_import.hpp"
#include "kernels/io/safetensors.hpp"
#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

constexpr double kLogitsTolerance = 1e-4, kLossTolerance = 1e-5;

const fs::path kFixture = fs::path(CONVEYOR_SOURCE_DIR) / "tests/data/hf_reference";

std::map<std::string, Tensor> by_name(const std::vector<NamedTensor>& tensors) {
  std::map<std::string, Tensor> out;
  for (const auto& t : tensors) out[t.name] = t.tensor;
  return out;
}

void check_case(const fs::path& dir) {
  const auto reference = by_name(read_safetensors((dir / "reference.safetensors").string()));
  const auto json = nlohmann::json::parse(read_text(dir / "reference.json"));
  REQUIRE(reference.count("tokens") == 1);
  REQUIRE(reference.count("logits") == 1);
  const Tensor& want = reference.at("logits");

  TempDir tmp;
  import_hf_folder({(dir / "hf").string(), tmp / "ckpt", 0});
  CheckpointModel model = load_checkpoint_model(tmp / "ckpt");
  const TokenLogits got = checkpoint_logits(model, reference.at("tokens"));

  // The reference's rows are the first of ours.
  const auto& g = got.logits.shape().dims();
  const auto& w = want.shape().dims();
  REQUIRE(w.size() == 3);
  REQUIRE(w[0] <= g[0]);
  REQUIRE(w[1] == g[1]);
  REQUIRE(w[2] == g[2]);
  double diff = 0, scale = 0;
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got.logits.f32()[i]) - want.f32()[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want.f32()[i])));
  }
  const double want_loss = json.at("loss").get<double>();
  const double logits_error = diff / scale, loss_error = std::abs(got.loss - want_loss) / std::abs(want_loss);
  MESSAGE(dir.filename().string() << ": logits max|a-b|/max|b| " << logits_error << " (limit " << kLogitsTolerance
                                  << "), loss " << got.loss << " vs " << want_loss << ": relative " << loss_error
                                  << " (limit " << kLossTolerance << ")");
  CHECK(logits_error <= kLogitsTolerance);
  CHECK(loss_error <= kLossTolerance);
}

}  // namespace

TEST_CASE("hf logits agree with transformers' on the stored reference models") {
  REQUIRE_MESSAGE(fs::is_directory(kFixture),
                  "no fixture at " << kFixture.string()
                                   << " (write it with scripts/hf_reference_check.py --write-fixture where "
                                      "transformers is installed)");
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(kFixture))
    if (fs::is_regular_file(e.path() / "reference.json")) cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  std::vector<std::string> names;
  for (const auto& c : cases) names.push_back(c.filename().string());
  CHECK(names == std::vector<std::string>{"tiny-gpt2", "tiny-llama-gqa-llama3"});
  for (const auto& dir : cases) {
    CAPTURE(dir.string());
    check_case(dir);
  }
}
