#pragma once
// Checks that involve more than one key (each key's own range and type are checked when
// it is read, by the rules in config_keys.cpp). Run once, after the file and every --set
// have been applied, so an override can repair what the file alone got wrong.
#include <optional>
#include <string>

#include "apps/config/run_config.hpp"

namespace conveyor {

/// The first problem found: the key to blame and a message that does not repeat it,
/// e.g. {"model.heads", "5 does not divide model.d_model 64 (choose heads that divide d_model)"}.
/// `other` is the second key involved, blamed for where the value came from when `key`
/// itself was left at its default.
struct ConfigProblem {
  std::string key;
  std::string message;
  std::string other;
};

std::optional<ConfigProblem> check_run_config(const RunConfig& config);

/// Throws InputError("key: message") for the first problem of check_run_config.
void validate_run_config(const RunConfig& config);

}  // namespace conveyor
