#pragma once
// Loading a run's configuration: the defaults of RunConfig, then the YAML file, then each
// `--set KEY=VALUE` in order, then the checks that span keys. Every user mistake is an
// InputError of one line that says where (file and line, or --set), the key, the bad value
// and what is allowed:
//   configs/x.yaml:4: model.heads: 5 does not divide model.d_model 64 (choose heads ...)
//   --set: train.lr: expected a number, got 'abc'
// The keys themselves are listed once, in config_keys.cpp.
#include <yaml-cpp/yaml.h>

#include <string>
#include <utility>
#include <vector>

#include "apps/config/run_config.hpp"

namespace conveyor {

/// Defaults, then the file at `path` (none when empty), then `overrides` ("KEY=VALUE",
/// VALUE read as YAML: `devices.ids=[0,1]`, `train.lr=1e-3`); validated. data.path is kept
/// as given (the data loader checks the file).
RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides = {});

/// Defaults, then `root` (a mapping of sections, or null for none); validated. `source`
/// names where `root` came from in error messages (a file name; may be empty).
RunConfig parse_run_config(const YAML::Node& root, const std::string& source = "");

/// Splits one --set argument into its key and its value parsed as YAML.
/// Throws InputError when there is no '=' or the value is not valid YAML.
std::pair<std::string, YAML::Node> parse_set_argument(const std::string& assignment);

/// Every key as a nested mapping, in the order of config_keys().
/// parse_run_config(resolved_yaml(c)) == c.
YAML::Node resolved_yaml(const RunConfig& config);

/// resolved_yaml as the text of the run folder's config.yaml, with each key's meaning as
/// a comment. Deterministic: equal configs give equal text (usable as a config hash).
std::string to_yaml(const RunConfig& config);

}  // namespace conveyor
