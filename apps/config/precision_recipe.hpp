#pragma once
// The precision recipe of a run in one line (precision.*): what `bench e2e` reports and the
// training log names, e.g. "bf16" or "fp8 (e4m3 activations and weights, e5m2 gradients,
// dynamic scaling)".
#include <string>

#include "apps/config/run_config.hpp"

namespace conveyor {

std::string precision_recipe(const PrecisionSection& precision);

}  // namespace conveyor
