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
  bool trace = false;    // also run with the trace recorder on, and report both
};

/// Figures: `per_action_us` (median over steps of a rank's step time per action),
/// `cpu_us_per_action` (process CPU time per executed action), `actions`, `steps`, ...
/// With `trace`: the same run again with every step traced (into a temporary folder,
/// removed after): `traced_per_action_us`, `traced_cpu_us_per_action`,
/// `trace_cost_us_per_action` (the difference of medians), `trace_bytes_per_step`, and
/// `record_ns_per_action`: the recorder's cost alone for one action with one message
/// sent and one received (a tight loop: free of the scheduling noise of the runs).
nlohmann::json run_overhead_bench(const OverheadOptions& options);

}  // namespace conveyor
