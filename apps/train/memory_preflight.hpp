#pragma once
// Before anything is built: can the stages of this process fit in this machine's memory
// at all? A model or micro-batch far too large would otherwise end in the kernel's
// out-of-memory kill (no message) or a bare std::bad_alloc in a stage, retried by the
// restart policy. The estimate is a lower bound, so it refuses only what cannot run:
// - every stage's parameters with their gradients and AdamW moments (CPU stages, f32: 16
//   bytes a parameter; GPU stages build their parameters on the host first: 4 bytes);
// - on the CPU, the activations the schedule keeps: a rank holds its peak count of
//   micro-batches in flight (actors/plan/schedule/activations.hpp: P on the first rank under
//   1F1B, every micro-batch under GPipe), each with the tensors its blocks keep for the
//   backward (attention probabilities included), and the head's logits of one;
// - all of it for every stage and replica when the job runs in one process; across
//   processes, what the busiest node holds at least (the largest stage, or an even share).
#include <cstdint>
#include <optional>
#include <string>

#include "apps/config/run_config.hpp"

namespace conveyor {

struct StageMemoryEstimate {
  double state_bytes = 0;        // parameters, gradients, moments
  double activation_bytes = 0;   // activations kept at the schedule's peak (CPU)
  int in_flight = 1;             // micro-batches in flight at that peak (largest stage)
  double total() const { return state_bytes + activation_bytes; }
};

/// The lower bound for the largest stage (rank) of `config` (no I/O).
StageMemoryEstimate largest_stage_memory(const RunConfig& config);

/// The lower bound for what one of `processes` processes holds: the whole job (every
/// rank of every replica) in one process.
StageMemoryEstimate process_memory(const RunConfig& config, int processes);

/// Why `config` cannot fit in `host_bytes` of memory, naming the keys to change; nullopt
/// when it may fit.
std::optional<std::string> host_memory_problem(const RunConfig& config, double host_bytes,
                                               int processes = 1);

/// This machine's memory (MemTotal of /proc/meminfo) in bytes; nullopt when unknown.
std::optional<double> host_memory_bytes();

/// Throws InputError with host_memory_problem's message when there is one.
void check_host_memory(const RunConfig& config, int processes = 1);

}  // namespace conveyor
