// Through the `conveyor` command: the same job trained on 1, 2, 3 or 4 stages, with GPipe
// or 1F1B, writes bitwise-identical weights and reports identical losses. This is the
// promise of README.md ("bitwise identical whatever the number of stages or the
// schedule") checked on the files a user gets, not on the library's return values.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/io/safetensors.hpp"
#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

struct RunFiles {
  std::vector<NamedTensor> weights;
  std::vector<double> step_losses;
  nlohmann::json summary;
};

RunFiles train_split(const std::string& data, int stages, const std::string& schedule,
                     const fs::path& out) {
  auto args = small_job(data);
  args.insert(args.end(), {"--set", "pipeline.stages=" + std::to_string(stages), "--set",
                           "pipeline.schedule=" + schedule, "--out", out.string(), "--format",
                           "json"});
  const CommandResult r = train_ok(args);
  RunFiles f;
  f.summary = nlohmann::json::parse(r.out);
  f.weights = read_safetensors((out / "weights.safetensors").string());
  for (const auto& row : read_jsonl(out / "metrics.jsonl"))
    if (row.contains("step") && !row.contains("event")) f.step_losses.push_back(row.at("loss").get<double>());
  return f;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

}  // namespace

TEST_CASE("training through the CLI on 1 to 4 stages with gpipe or 1f1b writes bitwise-identical weights") {
  TempDir dir;
  const std::string data = copy_english_text(dir);
  const RunFiles ref = train_split(data, 1, "gpipe", dir.path() / "ref");
  REQUIRE(ref.weights.size() == 2 + 12 * 4 + 3);  // wte, wpe, 4 blocks, ln_f, lm_head
  REQUIRE(ref.step_losses.size() == 6);

  for (const int stages : {1, 2, 3, 4}) {
    for (const std::string schedule : {"gpipe", "1f1b"}) {
      if (stages == 1 && schedule == "gpipe") continue;  // the reference itself
      CAPTURE(stages);
      CAPTURE(schedule);
      const RunFiles got = train_split(
          data, stages, schedule, dir.path() / (schedule + "_" + std::to_string(stages)));
      REQUIRE(got.weights.size() == ref.weights.size());
      for (std::size_t i = 0; i < ref.weights.size(); ++i) {
        CAPTURE(ref.weights[i].name);
        CHECK(got.weights[i].name == ref.weights[i].name);
        CHECK(same_bytes(got.weights[i].tensor, ref.weights[i].tensor));
      }
      CHECK(got.step_losses == ref.step_losses);  // exact: the same doubles
      CHECK(got.summary.at("final_loss") == ref.summary.at("final_loss"));
      CHECK(got.summary.at("final_val_loss") == ref.summary.at("final_val_loss"));
    }
  }
}
