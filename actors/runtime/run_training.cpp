#include "actors/runtime/run_training.hpp"

#include <caf/all.hpp>
#include <algorithm>
#include <atomic>
#include <memory>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <numeric>
#include <vector>

#include "actors/coordinator/coordinator_actor.hpp"
#include "actors/coordinator/step_accounting.hpp"
#include "actors/error_text.hpp"
#include "actors/fault/recovery_messages.hpp"
#include "actors/runtime/detached_threads.hpp"
#include "actors/runtime/hang_watchdog.hpp"
#include "actors/runtime/replica_groups.hpp"
#include "actors/runtime/scheduler_polling.hpp"
#include "actors/stage/stage_actor.hpp"
#include "actors/trace/hang_error.hpp"
#include "kernels/cpu/threads.hpp"

namespace conveyor {

TrainResult run_training(const TrainingJob& job_in, TrainingObserver& observer) {
  TrainingJob resolved = job_in;
  const int ranks_count = resolved.stage_actors();
  if (resolved.watchdog_timeout_s > 0 && !resolved.progress)
    resolved.progress = std::make_shared<trace::ProgressBoard>(ranks_count);
  if (!resolved.snapshots && resolved.recovery.snapshot_every > 0 &&
      (resolved.recovery.policy == FaultPolicy::restart ||
                              resolved.on_nan == NanPolicy::rollback))
    resolved.snapshots = std::make_shared<SnapshotStore>(ranks_count);
  // Groups of this process's stage actors: replicas of a stage, and the two holders of the
  // tied embedding (the only ones when the embedding and the head are one stage's).
  if ((resolved.replicas > 1 || resolved.model.tie_embeddings) && !resolved.replica_groups)
    resolved.replica_groups = std::make_shared<ReplicaGroups>(
        resolved.replicas, std::chrono::milliseconds(static_cast<std::int64_t>(
                               resolved.collective_timeout_s * 1000)));
  auto job = std::make_shared<const TrainingJob>(std::move(resolved));
  set_cpu_kernel_threads(job->threads_per_stage);  // before any stage computes
  caf::actor_system_config cfg;
  // Stage actors are detached (a thread each); the scheduler runs only the coordinator
  // and the blocking caller, so two threads suffice.
  const auto ranks = static_cast<std::size_t>(job->stage_actors());
  const std::size_t workers = job->detached_stages ? 2 : ranks + 2;
  cfg.set("scheduler.max-threads", workers);
  std::vector<int> actors(static_cast<std::size_t>(job->stage_actors()));
  std::iota(actors.begin(), actors.end(), 0);
  configure_idle_polling(cfg, *job, actors, static_cast<int>(workers), job->detached_stages);
  const auto detached = DetachedThreads::install(cfg);
  auto system = std::make_unique<caf::actor_system>(cfg);
  // Every actor handle lives below this line, so the stage threads end (each once its actor
  // is gone) before the system's destructor stops CAF's clock (detached_threads.hpp).
  AwaitDetachedThreads await_stage_threads{detached, system};
  const auto epoch = StageWorker::Clock::now();
  std::vector<caf::actor> stages;
  auto spawn_stage = [sys = system.get(), job, detached](auto&& fun, auto&&... args) {
    if (!job->detached_stages) return sys->spawn(fun, args...);
    caf::actor a = sys->spawn<caf::detached>(fun, args...);
    detached->spawned();
    return a;
  };
  for (int r = 0; r < job->stage_actors(); ++r) stages.push_back(spawn_stage(stage_actor, job, r, epoch));
  // Replacements are spawned like the originals; the watchdog is rearmed after a recovery.
  RunWatchdog watchdog;
  StageRestarts restarts;
  restarts.respawn = [spawn_stage, job, epoch](int rank, std::int64_t fence) {
    return spawn_stage(restarted_stage_actor, job, rank, epoch, fence);
  };
  watchdog.wire(restarts);
  auto coordinator = system->spawn(coordinator_actor, job, stages, &observer, restarts);
  watchdog.start(job, coordinator);

  TrainResult result;
  std::string failed;
  {
    caf::scoped_actor self{*system};
    self->request(coordinator, caf::infinite, train_atom::value)
        .receive([&](TrainResult& r) { result = std::move(r); },
                 [&](caf::error& e) { failed = error_text(*system, e); });
  }
  if (watchdog.stop()) {
    // The stage the diagnosis names may be stuck in its compute for good: wait for the
    // threads as long as the watchdog's grace period, not the default minute.
    await_stage_threads.limit_wait(std::chrono::milliseconds(
        static_cast<std::int64_t>(1000 * std::max(5.0, job->watchdog_timeout_s))));
    throw HangError(watchdog.diagnosis());
  }
  if (!failed.empty()) throw std::runtime_error(failed);
  return result;
}

}  // namespace conveyor
