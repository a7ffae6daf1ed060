#pragma once
// Turns tracing on for a training run: DIR/trace/ with the process's trace file and the
// plans the run executes (schedule.json), per the trace.* config keys.
#include <filesystem>
#include <memory>

#include "actors/runtime/training_job.hpp"
#include "actors/trace/step_range.hpp"
#include "actors/trace/trace_session.hpp"

namespace conveyor {

/// Creates run_dir/trace/ and returns the recorder for `job`. Throws on I/O errors.
std::shared_ptr<trace::TraceSession> open_run_trace(const std::filesystem::path& run_dir,
                                                    const trace::StepRange& steps,
                                                    const TrainingJob& job);

}  // namespace conveyor
