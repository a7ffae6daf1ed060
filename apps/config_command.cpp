// conveyor config [CONFIG] [--set KEY=VALUE]... [--keys] [--markdown]
// Prints the resolved config (defaults, file, overrides), or the reference of every key.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <memory>
#include <string>
#include <vector>

#include "apps/commands.hpp"
#include "apps/config/config_keys.hpp"
#include "apps/config/config_loader.hpp"
#include "apps/config/config_path.hpp"

namespace conveyor {

void add_config_command(CLI::App& app) {
  struct Options {
    std::string config;
    std::vector<std::string> overrides;
    bool keys = false;
    bool markdown = false;
  };
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "config", "Print the resolved config (validated), or every key with --keys");
  cmd->add_option("config", opt->config, "YAML config file (default: the built-in defaults)")
      ->check(config_path_check("the built-in defaults"));
  cmd->add_option("--set", opt->overrides, "Override a key with a YAML value (repeatable)");
  auto* keys = cmd->add_flag("--keys", opt->keys,
                             "List every config key: its default, meaning and allowed values");
  // --keys describes the keys, not a config: a file or --set beside it would be ignored.
  keys->excludes(cmd->get_option("config"))->excludes(cmd->get_option("--set"));
  cmd->add_flag("--markdown", opt->markdown, "With --keys: a Markdown table (README's Configuration table)")->needs(keys);
  cmd->callback([opt] {
    if (opt->keys) {
      fmt::print("{}", config_reference(opt->markdown));
      return;
    }
    fmt::print("{}", to_yaml(load_run_config(opt->config, opt->overrides)));
  });
}

}  // namespace conveyor
