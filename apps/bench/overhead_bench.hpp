#pragma once
// `conveyor bench overhead`: the runtime's own cost per action, measured by running the
// real actors (coordinator, detached stage actors, CAF messages, plan checks) with an
// empty stage model, so that only scheduling and messaging remain.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace conveyor {

struct OverheadOptions {
  int stages = 2;
  std::string schedule = "1f1b";
  int micro_batches = 64;
  std::int64_t steps = 200;
  bool detached = true;  // stage actors on their own threads, else on the scheduler
};

/// Figures: `per_action_us` (median over steps of a rank's step time per action),
/// `cpu_us_per_action` (process CPU time per executed action), `actions`, `steps`, ...
nlohmann::json run_overhead_bench(const OverheadOptions& options);

}  // namespace conveyor
