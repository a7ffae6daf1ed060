#pragma once
// Before anything is built: can one pipeline stage fit in this machine's memory at all?
// A model or micro-batch far too large would otherwise end in the kernel's out-of-memory
// kill (no message) or a bare std::bad_alloc in a stage, retried by the restart policy. The
// estimate is a lower bound, so it refuses only what cannot run: the largest stage's
// parameters with their gradients and AdamW moments (CPU stages, f32: 16 bytes a
// parameter; GPU stages build their parameters on the host first: 4 bytes), plus, on the
// CPU, the activations one micro-batch leaves in that stage (the tensors every block keeps
// for its backward, attention probabilities included).
#include <cstdint>
#include <optional>
#include <string>

#include "apps/config/run_config.hpp"

namespace conveyor {

struct StageMemoryEstimate {
  double state_bytes = 0;        // parameters, gradients, moments of the largest stage
  double activation_bytes = 0;   // one micro-batch's activations in that stage (CPU)
  double total() const { return state_bytes + activation_bytes; }
};

/// The lower bound for the largest stage of `config` (no I/O).
StageMemoryEstimate largest_stage_memory(const RunConfig& config);

/// Why `config` cannot fit in `host_bytes` of memory, naming the keys to change; nullopt
/// when it may fit.
std::optional<std::string> host_memory_problem(const RunConfig& config, double host_bytes);

/// This machine's memory (MemTotal of /proc/meminfo) in bytes; nullopt when unknown.
std::optional<double> host_memory_bytes();

/// Throws InputError with host_memory_problem's message when there is one.
void check_host_memory(const RunConfig& config);

}  // namespace conveyor
