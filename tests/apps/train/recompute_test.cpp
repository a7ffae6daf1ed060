// `conveyor train` with model.recompute: the same weights bit for bit as without, for a
// schedule with fused backward (1F1B) and one with split backward (ZBV); the resolved
// config and bench's JSON name the setting.
#include <doctest/doctest.h>

#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor;
using namespace conveyor::testing;

TEST_CASE("model.recompute attention and full train to the weights of none, bit for bit (1F1B and ZBV)") {
  TempDir dir;
  for (const std::string schedule : {"1f1b", "zbv"}) {
    CAPTURE(schedule);
    const auto kept = train_tiny_two_stages(dir, schedule + "-none", {"pipeline.schedule=" + schedule});
    const std::string want = read_text(kept / "weights.safetensors");
    REQUIRE(!want.empty());
    for (const std::string r : {"attention", "full"}) {
      CAPTURE(r);
      const auto run = train_tiny_two_stages(dir, schedule + "-" + r,
                                  {"pipeline.schedule=" + schedule, "model.recompute=" + r});
      CHECK(read_text(run / "weights.safetensors") == want);
      CHECK(read_text(run / "config.yaml").find("recompute: " + r) != std::string::npos);
    }
  }
}

TEST_CASE("model.recompute refuses an unknown setting, naming the key and the choices") {
  TempDir dir;
  const auto r = run_conveyor({"train", "configs/tiny.yaml", "--out", dir / "x", "--set",
                               "model.recompute=selective"});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("model.recompute") != std::string::npos);
  CHECK(r.err.find("none, attention, full") != std::string::npos);
  CHECK_FALSE(fs::exists(fs::path(dir / "x") / "weights.safetensors"));
}
