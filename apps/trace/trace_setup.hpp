#pragma once
// Turns tracing on for a training run: DIR/trace/ with the process's trace file and the
// plans the run executes (schedule.json), per the trace.* config keys.
#include <filesystem>
#include <memory>
#include <vector>

#include "actors/plan/job_plan.hpp"
#include "actors/trace/step_range.hpp"
#include "actors/trace/trace_session.hpp"

namespace conveyor {

/// This process's place in a multi-process job, for its trace file.
struct TraceProcess {
  std::uint32_t node = 0;
  /// This host's steady clock against node 0's (node 0 time = local + offset), from the
  /// rendezvous; the tools add it to every time of the file.
  std::int64_t clock_offset_ns = 0;
};

/// Creates run_dir/trace/ and returns the recorder for `job`: the file
/// trace/process-<node>.ctrace, and on node 0 the plans (schedule.json) with
/// `node_of_actor`, the node of each stage actor (empty: one process). Throws on I/O
/// errors.
std::shared_ptr<trace::TraceSession> open_run_trace(const std::filesystem::path& run_dir,
                                                    const trace::StepRange& steps,
                                                    const JobPlan& plan,
                                                    const TraceProcess& process = {},
                                                    const std::vector<int>& node_of_actor = {});

/// Issue 44, on node 0: the job moved onto `plan`'s layout (`generation`, the re-plans so
/// far), run by `node_of_actor`: appended to run_dir/trace/schedule.json's "relayouts"
/// (rewritten atomically), so that the analysis checks the rounds after it against these
/// plans. Throws on I/O errors, and InputError when schedule.json is not a plans document.
void add_run_trace_layout(const std::filesystem::path& run_dir, const JobPlan& plan,
                          const std::vector<int>& node_of_actor, int generation);

}  // namespace conveyor
