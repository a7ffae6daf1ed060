// How idle CAF workers wait: spinning only where every busy thread has a core, and the
// keys set as CAF's work-stealing policy reads them.
#include "actors/runtime/scheduler_polling.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/config_value.hpp>
#include <caf/settings.hpp>
#include <doctest/doctest.h>

using namespace conveyor;

namespace {

// The default job: 4 detached CPU stages, one kernel thread each, the coordinator's two
// workers.
ProcessThreads detached_cpu_stages(int stages, int kernel_threads) {
  ProcessThreads t;
  t.scheduler = 2;
  t.detached = stages;
  t.cpu_stages = stages;
  t.kernel_threads = kernel_threads;
  return t;
}

}  // namespace

TEST_CASE("idle workers sleep at once when the busy threads outnumber the cores") {
  CHECK(idle_polling(detached_cpu_stages(4, 1), 2) == IdlePolling::sleep);
  CHECK(idle_polling(detached_cpu_stages(1, 1), 2) == IdlePolling::sleep);
  CHECK(idle_polling(detached_cpu_stages(4, 1), 6) == IdlePolling::caf_default);
  // Extra kernel threads of CPU stages count: 2 + 4 + 4·1 = 10 on 8 cores.
  CHECK(idle_polling(detached_cpu_stages(4, 2), 8) == IdlePolling::sleep);
  CHECK(idle_polling(detached_cpu_stages(4, 2), 10) == IdlePolling::caf_default);
  CHECK(idle_polling(detached_cpu_stages(1, 1), 0) == IdlePolling::sleep);  // unknown: one core
}

TEST_CASE("stage actors on the scheduler poll eagerly only with a core for every thread") {
  ProcessThreads gpu;  // two GPU stages of one node: 4 workers, no CPU compute
  gpu.scheduler = 4;
  gpu.scheduled_stages = true;
  gpu.kernel_threads = 8;  // ignored: no stage computes on the CPU
  CHECK(idle_polling(gpu, 16) == IdlePolling::eager);
  CHECK(idle_polling(gpu, 2) == IdlePolling::sleep);
  ProcessThreads cpu = gpu;
  cpu.cpu_stages = 2;
  CHECK(idle_polling(cpu, 16) == IdlePolling::sleep);  // 4 + 2·7 = 18 threads
  cpu.kernel_threads = 1;
  CHECK(idle_polling(cpu, 4) == IdlePolling::eager);
}

TEST_CASE("the polling keys are set as CAF's work-stealing policy reads them") {
  const auto read = [](const caf::actor_system_config& cfg, const char* key, std::size_t fallback) {
    return caf::get_or(cfg, key, fallback);
  };
  caf::actor_system_config plain;
  apply_idle_polling(plain, IdlePolling::caf_default);
  CHECK(read(plain, "work-stealing.moderate-poll-attempts", 777) == 777);
  caf::actor_system_config sleeping;
  apply_idle_polling(sleeping, IdlePolling::sleep);
  CHECK(read(sleeping, "work-stealing.moderate-poll-attempts", 777) == 0);
  caf::actor_system_config eager;
  apply_idle_polling(eager, IdlePolling::eager);
  CHECK(read(eager, "work-stealing.aggressive-poll-attempts", 777) == 10000);
  CHECK(caf::get_or(eager, "work-stealing.moderate-sleep-duration", caf::timespan{}) ==
        caf::timespan{std::chrono::microseconds(2)});
}
