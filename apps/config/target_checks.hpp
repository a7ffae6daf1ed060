#pragma once
// Cross-key checks of what names a stage, a step or a device: fault.inject entries must hit
// a stage, micro-batch and step the run has (an entry that can never fire would let a
// fault test pass for the wrong reason), and trace.steps must reach a step the run takes.
// (devices.ids with devices.kind cpu is left alone: a GPU config run on the CPU with
// --set devices.kind=cpu keeps its ids.)
#include <optional>

#include "apps/config/config_validation.hpp"
#include "apps/config/run_config.hpp"

namespace conveyor {

/// The first problem, naming the key and the key it conflicts with; nullopt when none.
std::optional<ConfigProblem> check_targets(const RunConfig& config);

}  // namespace conveyor
