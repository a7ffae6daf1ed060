#pragma once
// Node k > 0 of a job with a hang watchdog: sends its stages' states to node 0's directory
// every `interval` (ProgressReport; node 0's watchdog sees every rank, remote_progress.hpp
// says how the clocks are reconciled). A report is a few dozen bytes per stage; the
// interval is a small fraction of watchdog.timeout_s, so a report's lag never decides a
// diagnosis. Runs until it is sent an exit (the node's EndActors).
#include <caf/all.hpp>
#include <chrono>
#include <memory>
#include <vector>

#include "actors/trace/stage_progress.hpp"

namespace conveyor {

/// How often a node reports for a watchdog of `timeout_s`: a tenth of it, within
/// [20 ms, 250 ms].
std::chrono::milliseconds progress_report_interval(double timeout_s);

caf::behavior progress_reporter(caf::event_based_actor* self,
                                std::shared_ptr<const trace::ProgressBoard> board,
                                std::vector<int> ranks, int node, caf::actor node0_directory,
                                std::chrono::milliseconds interval);

}  // namespace conveyor
