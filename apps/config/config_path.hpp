#pragma once
// The CONFIG argument of `train`, `config`, `sched` and `bench e2e|model|kernels`. Left
// out, each command has its meaning for it (configs/tiny.yaml, the built-in defaults, a
// schedule from flags); given empty (a script's unset variable: `conveyor train "$CFG"`),
// it would silently mean the same. It is refused instead, naming the argument:
//   error: config: the config path is empty: give a YAML config file, or leave CONFIG
//   out for configs/tiny.yaml (see --help)
#include <CLI/CLI.hpp>
#include <string>

namespace conveyor {

/// The check of a CONFIG positional; `left_out` says what leaving CONFIG out means.
CLI::Validator config_path_check(const std::string& left_out);

}  // namespace conveyor
