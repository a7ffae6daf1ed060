#include "actors/runtime/hang_watchdog.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "actors/plan/eval_plan.hpp"
#include "actors/messages/recovery_messages.hpp"
#include "actors/messages/messages.hpp"
#include "actors/trace/hang_error.hpp"

namespace conveyor {
namespace {

trace::WaitForContext wait_for_context(const Job& job) {
  trace::WaitForContext c;
  c.placement = job.plan.placement;
  // As the coordinator sends them: every replica its stage's train list, replica 0 alone
  // the eval list.
  const auto layout = job.plan.replica_layout();
  for (int a = 0; a < layout.actors(); ++a) {
    const auto& rank = job.plan.placement.ranks.at(static_cast<std::size_t>(layout.stage_of(a)));
    c.train_plans.push_back(
        job.plan.schedule_of(layout.replica_of(a)).ranks.at(static_cast<std::size_t>(layout.stage_of(a))));
    c.eval_plans.push_back(layout.replica_of(a) == 0 ? eval_actions(rank, 0, job.plan.eval_batches)
                                                     : std::vector<sched::Action>{});
  }
  c.eval_wave = job.plan.eval_wave();
  return c;
}

}  // namespace

std::unique_ptr<trace::Watchdog> start_hang_watchdog(const std::shared_ptr<const Job>& job,
                                                     const CoordinatorActor& coordinator,
                                                     std::shared_ptr<std::string> diagnosis) {
  if (job->plan.watchdog_timeout_s <= 0 || !job->services.progress) return nullptr;
  const bool restart = job->plan.recovery.policy == FaultPolicy::restart && job->plan.recovers_in_place();
  auto watchdog = std::make_unique<trace::Watchdog>(
      job->services.progress, wait_for_context(*job), job->plan.watchdog_timeout_s, job->services.trace,
      [coordinator, diagnosis, restart](const trace::HangDiagnosis& d) {
        *diagnosis = d.text();
        std::fputs(diagnosis->c_str(), stderr);
        if (restart)
          caf::anon_send(coordinator, stage_hang_atom::value, d.graph.culprit, d.graph.verdict);
        else
          caf::anon_send(coordinator, stop_run_atom::value, "hang: " + d.graph.verdict);
      },
      [] {
        std::fputs("watchdog: the run did not stop after the diagnosis; exiting\n", stderr);
        std::fflush(stderr);
        std::_Exit(kExitHang);
      },
      std::max(2.0, job->plan.watchdog_timeout_s));
  watchdog->on_pause([](double seconds) {
    std::fprintf(stderr,
                 "watchdog: this process did not run for %.1f s (stopped, or starved of CPU): not a hang; "
                 "every deadline counts again from now\n",
                 seconds);
  });
  return watchdog;
}

void RunWatchdog::wire(StageRestarts& restarts) const {
  restarts.recovered = [armed = armed_] {
    if (auto* w = armed->load()) w->rearm();
  };
  restarts.waiting_for_replacement = [armed = armed_] {
    if (auto* w = armed->load()) w->pause();
  };
}

void RunWatchdog::start(const std::shared_ptr<const Job>& job, const CoordinatorActor& coordinator) {
  watchdog_ = start_hang_watchdog(job, coordinator, diagnosis_);
  armed_->store(watchdog_.get());
}

bool RunWatchdog::stop() {
  const bool hung = watchdog_ && watchdog_->fired();
  armed_->store(nullptr);
  watchdog_.reset();  // stops it (a fired one is waiting out its grace period)
  return hung;
}

}  // namespace conveyor
