#include "actors/runtime/scheduler_polling.hpp"

#include <algorithm>
#include <chrono>

#include <caf/timespan.hpp>
#include <thread>

#include "actors/job/job_services.hpp"

namespace conveyor {

IdlePolling idle_polling(const ProcessThreads& threads, unsigned cores) {
  const long busy = static_cast<long>(threads.scheduler) + threads.detached +
                    static_cast<long>(threads.cpu_stages) * std::max(0, threads.kernel_threads - 1);
  if (busy > static_cast<long>(std::max(1u, cores))) return IdlePolling::sleep;
  return threads.scheduled_stages ? IdlePolling::eager : IdlePolling::caf_default;
}

void apply_idle_polling(caf::actor_system_config& cfg, IdlePolling polling) {
  switch (polling) {
    case IdlePolling::caf_default:
      return;
    case IdlePolling::eager:
      cfg.set("work-stealing.aggressive-poll-attempts", 10000);
      cfg.set("work-stealing.moderate-sleep-duration",
              caf::timespan{std::chrono::microseconds(2)});
      return;
    case IdlePolling::sleep:
      cfg.set("work-stealing.moderate-poll-attempts", 0);
      return;
  }
}

void configure_idle_polling(caf::actor_system_config& cfg, const Job& job,
                            const std::vector<int>& actors, int scheduler, bool detached) {
  ProcessThreads threads;
  threads.scheduler = scheduler;
  threads.detached = detached ? static_cast<int>(actors.size()) : 0;
  threads.scheduled_stages = !detached;
  threads.kernel_threads = job.plan.threads_per_stage;
  for (int a : actors)
    if (job.plan.actor_placement(a).device.is_cpu()) ++threads.cpu_stages;
  apply_idle_polling(cfg, idle_polling(threads, std::thread::hardware_concurrency()));
}

}  // namespace conveyor
