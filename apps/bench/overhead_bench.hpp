#pragma once
// `conveyor bench overhead`: the runtime's own cost per action, measured by running the
// real actors (coordinator, detached stage actors, CAF messages, plan checks) with an
// empty stage model, so that only scheduling and messaging remain.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace conveyor {

/// Upper bound of --stages: a thread each (detached stage actors). Deeper than any
/// pipeline in use; 1024 stages at the default 64 micro-batches × 200 steps take about
/// 90 s on 2 cores.
inline constexpr int kMaxOverheadStages = 1024;

struct OverheadOptions {
  int stages = 2;
  std::string schedule = "1f1b";
  int micro_batches = 64;
  std::int64_t steps = 200;
  bool detached = true;  // stage actors on their own threads, else on the scheduler
  bool trace = false;    // also run with the trace recorder on, and report both
};

/// Figures: `actions` (every rank's actions, every step: the schedule's actions × steps),
/// `per_action_us` (the median counted step's wall time over `critical_path_actions`, the
/// actions of a step's longest dependency chain: its makespan at one unit per action;
/// `per_action_us_mean` the same over the sum of the counted steps), `step_us_median`
/// (the median counted step), `cpu_us_per_action` (process CPU time of the whole run over
/// `actions`), `steps`, `warmup_steps` (the first
/// 5, or all but the last of fewer than 7, left out of the wall-time figures) ...
/// With `trace`: the same run again with every step traced (into a temporary folder,
/// removed after): `traced_per_action_us`, `traced_cpu_us_per_action`,
/// `trace_cost_us_per_action` (the difference of medians, kept as measured: negative when
/// the recorder's cost is below the noise between the two runs), `trace_bytes_per_step`,
/// and `record_ns_per_action`: the recorder's cost alone for one action with one message
/// sent and one received (a tight loop: free of the scheduling noise of the runs).
nlohmann::json run_overhead_bench(const OverheadOptions& options);

/// The text form: one line per figure; a negative trace cost shows as
/// "0 (within noise: measured -0.12)".
std::string format_overhead_text(const nlohmann::json& result);

}  // namespace conveyor
