#pragma once
// The job's hang watchdog (watchdog.timeout_s), one per job: in the process of a job that
// runs in one, on node 0 of a job that spans processes (its ProgressBoard then holds every
// rank: node 0's stages publish into it, the other nodes' reports are copied into it,
// actors/trace/remote_progress.hpp). What it does with a hang:
//  - prints the diagnosis (wait-for graph and verdict) to stderr and keeps it for the
//    caller's HangError;
//  - under fault.policy restart, where the job recovers in place, hands the verdict to the
//    coordinator, which replaces the blamed stage and rearms the watchdog after the
//    recovery (StageRestarts::recovered); otherwise asks the coordinator to fail the run;
//  - if the run has neither recovered nor ended a grace period later (a stage stuck inside
//    a kernel never reads its mailbox), ends the process with exit code kExitHang.
#include <caf/all.hpp>
#include <memory>
#include <string>

#include "actors/runtime/training_job.hpp"
#include "actors/trace/watchdog.hpp"

namespace conveyor {

/// Null when the job has no watchdog (watchdog_timeout_s 0) or no progress board.
/// `diagnosis` receives the text of the hang it diagnosed.
std::unique_ptr<trace::Watchdog> start_hang_watchdog(const std::shared_ptr<const TrainingJob>& job,
                                                     const caf::actor& coordinator,
                                                     std::shared_ptr<std::string> diagnosis);

}  // namespace conveyor
