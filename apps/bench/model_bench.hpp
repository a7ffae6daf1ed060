#pragma once
// `conveyor bench model CONFIG`: the config's model trained two ways in one process — on
// one device with gradient accumulation over the same micro-batches, then as the
// configured pipeline — with `bench e2e`'s figures for each and the pipeline efficiency
// (pipeline tokens/s over devices × one-device tokens/s).
#include <nlohmann/json.hpp>

#include "apps/bench/e2e_bench.hpp"

namespace conveyor {

nlohmann::json run_model_bench(const E2eOptions& options);

}  // namespace conveyor
