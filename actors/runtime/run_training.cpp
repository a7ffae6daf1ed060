#include "actors/runtime/run_training.hpp"

#include <caf/all.hpp>
#include <memory>
#include <stdexcept>

#include "actors/coordinator/coordinator_actor.hpp"
#include "actors/error_text.hpp"
#include "actors/stage/stage_actor.hpp"
#include "kernels/cpu/threads.hpp"

namespace conveyor {

TrainResult run_training(const TrainingJob& job_in, TrainingObserver& observer) {
  auto job = std::make_shared<const TrainingJob>(job_in);
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

  TrainResult result;
  std::string failed;
  {
    caf::scoped_actor self{system};
    self->request(coordinator, caf::infinite, train_atom::value)
        .receive([&](TrainResult& r) { result = std::move(r); },
                 [&](caf::error& e) { failed = error_text(system, e); });
  }
  if (!failed.empty()) throw std::runtime_error(failed);
  return result;
}

}  // namespace conveyor
