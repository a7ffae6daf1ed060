// An empty CONFIG argument (a script's unset variable) is refused naming the argument, by
// every command that takes one; it used to mean "no file": configs/tiny.yaml for train
// and bench, the built-in defaults for config and sched.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/apps/support/run_command.hpp"
#include "tests/support/temp_dir.hpp"

using conveyor::testing::CommandOptions;
using conveyor::testing::CommandResult;
using conveyor::testing::run_command;
using conveyor::testing::TempDir;

TEST_CASE("an empty CONFIG argument exits 2 naming the argument, and writes nothing") {
  TempDir dir;  // the working directory: train would create runs/ here
  const std::vector<std::vector<std::string>> commands = {
      {"train", ""}, {"config", ""}, {"sched", ""}, {"bench", "e2e", ""}, {"bench", "model", ""},
      {"bench", "kernels", ""}};
  for (auto args : commands) {
    std::string shown;
    for (const auto& a : args) shown += (shown.empty() ? "" : " ") + (a.empty() ? std::string("\"\"") : a);
    CAPTURE(shown);
    args.insert(args.begin(), CONVEYOR_BINARY);
    CommandOptions options;
    options.cwd = dir.path().string();
    options.timeout = std::chrono::seconds(60);
    const CommandResult r = run_command(args, options);
    CAPTURE(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("error: config: the config path is empty: give a YAML config file, or leave CONFIG out for ") !=
          std::string::npos);
    CHECK(r.out.empty());
    CHECK(std::filesystem::is_empty(dir.path()));
  }
}
