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
#include <atomic>
#include <memory>
#include <string>

#include "actors/coordinator/coordinator_actor.hpp"
#include "actors/job/job_services.hpp"
#include "actors/trace/watchdog.hpp"

namespace conveyor {

/// Null when the job has no watchdog (watchdog_timeout_s 0) or no progress board.
/// `diagnosis` receives the text of the hang it diagnosed.
std::unique_ptr<trace::Watchdog> start_hang_watchdog(const std::shared_ptr<const Job>& job,
                                                     const CoordinatorActor& coordinator,
                                                     std::shared_ptr<std::string> diagnosis);

/// The watchdog of one run, wired to its coordinator. The coordinator is spawned before
/// the watchdog (which needs its handle) but must rearm it after each recovery and pause
/// it while waiting for a lost node's replacement: `wire` fills those StageRestarts hooks,
/// which reach the watchdog through a pointer that is null before `start` and after
/// `stop`. Use: wire(restarts); spawn the coordinator; start(job, coordinator); run;
/// stop().
class RunWatchdog {
 public:
  RunWatchdog() = default;
  RunWatchdog(const RunWatchdog&) = delete;
  RunWatchdog& operator=(const RunWatchdog&) = delete;
  /// Stops it, so the hooks never reach a destroyed watchdog (a run that threw).
  ~RunWatchdog() { stop(); }

  /// Sets restarts.recovered (rearm) and restarts.waiting_for_replacement (pause).
  void wire(StageRestarts& restarts) const;
  /// Starts the watchdog if the job has one (start_hang_watchdog).
  void start(const std::shared_ptr<const Job>& job, const CoordinatorActor& coordinator);
  /// Stops it; true when it diagnosed a hang the run did not recover from (the caller
  /// throws HangError(diagnosis())).
  bool stop();
  /// The text of the last hang diagnosed.
  const std::string& diagnosis() const { return *diagnosis_; }

 private:
  std::shared_ptr<std::atomic<trace::Watchdog*>> armed_ =
      std::make_shared<std::atomic<trace::Watchdog*>>(nullptr);
  std::shared_ptr<std::string> diagnosis_ = std::make_shared<std::string>();
  std::unique_ptr<trace::Watchdog> watchdog_;
};

}  // namespace conveyor
