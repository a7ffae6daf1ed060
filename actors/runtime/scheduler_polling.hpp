#pragma once
// How CAF's idle scheduler workers wait for work. Each worker that finds its queue empty
// first spins, then (CAF's default) naps 50 µs at a time 500 times, then sleeps on a
// condition variable until a message wakes it. The spins and naps cut the latency of the
// next message, and cost nothing while every thread that computes has a core of its own;
// on a machine with fewer cores they preempt the compute threads thousands of times a
// second (on 2 cores: 15% of tiny.yaml's wall time, docs/PERFORMANCE.md).
#include <vector>

#include <caf/actor_system_config.hpp>

namespace conveyor {

struct Job;

enum class IdlePolling {
  caf_default,  // CAF's spin, then naps: the coordinator alone on the scheduler
  eager,        // long spin, 2 µs naps: stage actors on the scheduler, latency first
  sleep,        // short spin, then the condition variable: cores are oversubscribed
};

/// The threads a process keeps busy, to weigh against its cores.
struct ProcessThreads {
  int scheduler = 0;      // CAF scheduler workers (scheduler.max-threads)
  int detached = 0;       // threads of detached stage actors
  int cpu_stages = 0;     // stage actors computing on the CPU (on a worker or detached)
  int kernel_threads = 1; // CPU kernel threads of each such stage (its own included)
  bool scheduled_stages = false;  // stage actors run on the scheduler's workers
};

/// eager or caf_default (by where the stages run) when every thread has a core of its
/// own: the scheduler's, the detached stages', and the extra kernel threads of CPU stages;
/// else sleep. `cores` 0 (unknown) counts as one.
IdlePolling idle_polling(const ProcessThreads& threads, unsigned cores);

/// Sets CAF's work-stealing keys for `polling` (caf_default sets none).
void apply_idle_polling(caf::actor_system_config& cfg, IdlePolling polling);

/// Both for a process that runs `job`'s stage actors `actors` with `scheduler` workers, on
/// threads of their own when `detached`, else on the workers.
void configure_idle_polling(caf::actor_system_config& cfg, const Job& job,
                            const std::vector<int>& actors, int scheduler, bool detached);

}  // namespace conveyor
