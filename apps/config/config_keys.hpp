#pragma once
// The single list of configuration keys. The loader, the resolved config.yaml, error
// suggestions and the key reference (`conveyor config --list`, the README table) all walk
// it, so adding a key is one line in config_keys.cpp and nothing else.
#include <yaml-cpp/yaml.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "apps/config/run_config.hpp"

namespace conveyor {

struct ConfigKey {
  std::string name;     // dotted, as written in configs and --set: "model.layers"
  std::string allowed;  // the values it takes: "integer, >= 1"
  std::string help;     // what it means, one line
  /// Reads `value` into the config; throws ConfigValueError (a message without the key).
  std::function<void(RunConfig&, const YAML::Node& value)> set;
  /// The value as written to the resolved config (set(get(c)) leaves c unchanged).
  std::function<YAML::Node(const RunConfig&)> get;
  /// A secret (serve.token): read from configs and --set, never written to a resolved
  /// config (config.yaml of a run or a checkpoint, `conveyor config`) nor served.
  bool secret = false;
};

/// Every key, in the order of the reference and the resolved config.
const std::vector<ConfigKey>& config_keys();

/// The key named `name`, or nullptr.
const ConfigKey* find_config_key(std::string_view name);

/// True when `prefix` ("model", "train") is a section: some key is named "prefix.*".
bool is_config_section(std::string_view prefix);

/// "unknown key 'model.layer' (did you mean 'model.layers'?)", or, with nothing close,
/// a list of the section's keys or of the sections.
std::string unknown_key_message(std::string_view name);

/// Every key with its default, allowed values and meaning, as aligned plain text under a
/// '#' line naming the columns and the bound of every integer key (markdown = false), or
/// a markdown table (markdown = true: README's, which states that bound above it).
std::string config_reference(bool markdown = false);

}  // namespace conveyor
