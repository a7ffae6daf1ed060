// Configs written to hurt: nested YAML aliases (a few hundred bytes that stand for
// billions of values), values with newlines or of a megabyte. Each is refused quickly,
// in one short line naming the file or the key, never echoed whole.
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "apps/config/config_loader.hpp"
#include "apps/config/yaml_size.hpp"
#include "kernels/common/error.hpp"
#include "tests/apps/train/train_test_support.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

// `depth` levels of nine aliases each: level k is a list of nine copies of level k - 1,
// so the value stands for 9^(depth + 1) scalars in about 25 bytes a level.
std::string alias_bomb(int depth) {
  std::string level = "&a0 [x, x, x, x, x, x, x, x, x]";
  for (int k = 1; k <= depth; ++k) {
    const std::string below = "*a" + std::to_string(k - 1);
    std::string next = "&a" + std::to_string(k) + " [" + level;
    for (int i = 0; i < 8; ++i) next += ", " + below;
    level = next + "]";
  }
  return level;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "<no InputError thrown>";
}

}  // namespace

TEST_CASE("an alias bomb of depth 8 under a real key is refused in under 0.1 s, naming the file") {
  TempDir dir;
  const std::string text = "fault:\n  inject: " + alias_bomb(8) + "\n";
  CHECK(text.size() < 1000);
  const auto path = dir.write("bomb.yaml", text);
  const auto start = std::chrono::steady_clock::now();
  const std::string msg = error_of([&] { load_run_config(path, {}); });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE("refused in " << seconds * 1e3 << " ms");
  CHECK(seconds < 0.1);
  CHECK(msg.find(path + ": the YAML expands to more than") != std::string::npos);
  CHECK(msg.size() < 300);

  // The same through --set, naming the key.
  const std::string set_msg = error_of([&] { load_run_config("", {"fault.inject=" + alias_bomb(8)}); });
  CHECK(set_msg.find("--set fault.inject: the YAML expands to more than") != std::string::npos);
}

TEST_CASE("expanded_node_count counts aliases as often as they are reached, and stops at its limit") {
  CHECK(expanded_node_count(YAML::Load("[a, b]"), 100) == 3);
  CHECK(expanded_node_count(YAML::Load("{a: 1, b: [2, 3]}"), 100) == 7);  // keys count too
  CHECK(expanded_node_count(YAML::Load("[&x [1, 2], *x, *x]"), 100) == 10);
  CHECK(expanded_node_count(YAML::Load(alias_bomb(8)), 1000) == 1001);
  // Under the bound, an alias is allowed: a real config may use one.
  TempDir dir;
  const auto path = dir.write("alias.yaml", "pipeline:\n  stages: &n 2\ntrain:\n  warmup_steps: *n\n");
  const auto config = load_run_config(path, {});
  CHECK(config.pipeline.stages == 2);
  CHECK(config.train.warmup_steps == 2);
}

TEST_CASE("a value with newlines or of a megabyte is shown escaped and shortened, in one line") {
  const std::string newline_key = error_of([&] { load_run_config("", {"model.lay\ners=4"}); });
  CHECK(newline_key.find("unknown key 'model.lay\\ners'") != std::string::npos);
  CHECK(newline_key.find('\n') == std::string::npos);

  const std::string newline_value = error_of([&] { load_run_config("", {"pipeline.schedule=\"1f\\nb\\nc\""}); });
  CHECK(newline_value.find("pipeline.schedule") != std::string::npos);
  CHECK(newline_value.find("1f\\nb\\nc") != std::string::npos);
  CHECK(newline_value.find('\n') == std::string::npos);

  TempDir dir;
  const std::string huge(1 << 20, 'x');
  const auto path = dir.write("huge.yaml", "pipeline:\n  schedule: " + huge + "\n");
  const std::string msg = error_of([&] { load_run_config(path, {}); });
  INFO(msg.substr(0, 400));
  CHECK(msg.find("pipeline.schedule") != std::string::npos);
  CHECK(msg.find("… (1048576 bytes)") != std::string::npos);
  CHECK(msg.size() < 1000);

  const std::string huge_key = error_of([&] { load_run_config("", {huge + "=1"}); });
  CHECK(huge_key.find("unknown key 'xxx") != std::string::npos);
  CHECK(huge_key.size() < 1000);
}

TEST_CASE("conveyor prints every error as one line, whatever it quotes") {
  const auto r = run_conveyor({"train", "--set", "model.lay\ners=4"});
  CHECK(r.exit_code == 2);
  INFO(r.err);
  CHECK(r.err == "error: --set: unknown key 'model.lay\\ners' (did you mean 'model.layers'?)\n");
}
