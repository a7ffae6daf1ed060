#include "actors/runtime/run_training.hpp"

#include <caf/all.hpp>
#include <algorithm>
#include <memory>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "actors/coordinator/coordinator_actor.hpp"
#include "actors/coordinator/step_accounting.hpp"
#include "actors/error_text.hpp"
#include "actors/stage/stage_actor.hpp"
#include "actors/trace/hang_error.hpp"
#include "actors/trace/watchdog.hpp"
#include "kernels/cpu/threads.hpp"

namespace conveyor {
namespace {

trace::WaitForContext wait_for_context(const TrainingJob& job) {
  trace::WaitForContext c;
  c.placement = job.placement;
  c.train_plans = job.schedule.ranks;
  for (const auto& rank : job.placement.ranks)
    c.eval_plans.push_back(eval_actions(rank, job.eval_batches));
  return c;
}

// Abort policy of a hang (restarts come with fault tolerance): print the diagnosis, ask
// the coordinator to fail the run (it stops every stage), and if the run has not ended
// a few seconds later (a stage stuck inside a kernel never reads its mailbox) exit hard.
std::unique_ptr<trace::Watchdog> start_watchdog(const std::shared_ptr<const TrainingJob>& job,
                                                const caf::actor& coordinator,
                                                std::shared_ptr<std::string> diagnosis) {
  if (job->watchdog_timeout_s <= 0 || !job->progress) return nullptr;
  return std::make_unique<trace::Watchdog>(
      job->progress, wait_for_context(*job), job->watchdog_timeout_s, job->trace,
      [coordinator, diagnosis](const trace::HangDiagnosis& d) {
        *diagnosis = d.text();
        std::fputs(diagnosis->c_str(), stderr);
        caf::anon_send(coordinator, stop_run_atom::value, "hang: " + d.graph.verdict);
      },
      [] {
        std::fputs("watchdog: the run did not stop after the diagnosis; exiting\n", stderr);
        std::fflush(stderr);
        std::_Exit(kExitHang);
      },
      std::max(2.0, job->watchdog_timeout_s));
}

}  // namespace

TrainResult run_training(const TrainingJob& job_in, TrainingObserver& observer) {
  TrainingJob resolved = job_in;
  if (resolved.watchdog_timeout_s > 0 && !resolved.progress)
    resolved.progress =
        std::make_shared<trace::ProgressBoard>(static_cast<int>(resolved.placement.ranks.size()));
  auto job = std::make_shared<const TrainingJob>(std::move(resolved));
  set_cpu_kernel_threads(job->threads_per_stage);  // before any stage computes
  caf::actor_system_config cfg;
  // Stage actors are detached (a thread each); the scheduler runs only the coordinator
  // and the blocking caller, so two threads suffice.
  const auto ranks = job->placement.ranks.size();
  cfg.set("scheduler.max-threads", job->detached_stages ? 2 : ranks + 2);
  if (!job->detached_stages) {  // stay awake longer between messages
    cfg.set("work-stealing.aggressive-poll-attempts", 10000);
    cfg.set("work-stealing.moderate-sleep-duration", caf::timespan{std::chrono::microseconds(2)});
  }
  caf::actor_system system{cfg};
  const auto epoch = StageWorker::Clock::now();
  std::vector<caf::actor> stages;
  for (int r = 0; r < static_cast<int>(job->placement.ranks.size()); ++r)
    stages.push_back(job->detached_stages
                         ? system.spawn<caf::detached>(stage_actor, job, r, epoch)
                         : system.spawn(stage_actor, job, r, epoch));
  auto coordinator = system.spawn(coordinator_actor, job, stages, &observer);

  auto diagnosis = std::make_shared<std::string>();
  auto watchdog = start_watchdog(job, coordinator, diagnosis);

  TrainResult result;
  std::string failed;
  {
    caf::scoped_actor self{system};
    self->request(coordinator, caf::infinite, train_atom::value)
        .receive([&](TrainResult& r) { result = std::move(r); },
                 [&](caf::error& e) { failed = error_text(system, e); });
  }
  const bool hung = watchdog && watchdog->fired();
  watchdog.reset();  // stops it (a fired one is waiting out its grace period)
  if (hung) throw HangError(*diagnosis);
  if (!failed.empty()) throw std::runtime_error(failed);
  return result;
}

}  // namespace conveyor
