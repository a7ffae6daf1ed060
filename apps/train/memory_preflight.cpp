#include "apps/train/memory_preflight.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "kernels/common/error.hpp"

namespace conveyor {

StageMemoryEstimate largest_stage_memory(const RunConfig& c) {
  // In double: a mistyped size (d_model 1e9) must not overflow into a small number.
  const auto& m = c.model;
  const double d = static_cast<double>(m.d_model), V = static_cast<double>(m.vocab);
  const double T = static_cast<double>(m.seq_len), H = static_cast<double>(m.heads);
  const double L = static_cast<double>(m.layers), P = static_cast<double>(c.pipeline.stages);
  // qkv, proj, fc1, fc2 with their biases and two LayerNorms a block; wte, wpe, ln_f and
  // the head (its own copy when tied, on the head's stage).
  const double params = L * (12.0 * d * d + 13.0 * d) + 2.0 * V * d + T * d + 2.0 * d;
  const bool cpu = c.devices.kind == "cpu";
  StageMemoryEstimate e;
  // The largest stage holds at least the average.
  e.state_bytes = params / P * (cpu ? 16.0 : 4.0);
  if (cpu) {
    // Per token and block kept for the backward: x, ln1, qkv (3d), the attention output,
    // ln2, fc1 and GELU (4d each), 15d floats, and H·T attention probabilities; with
    // recomputation, the block's input at least.
    const double kept = m.recompute == Recompute::none ? 15.0 * d + H * T : d;
    const double tokens = static_cast<double>(c.pipeline.micro_batch_size) * T;
    e.activation_bytes = 4.0 * tokens * kept * (L / P);
  }
  return e;
}

std::optional<std::string> host_memory_problem(const RunConfig& c, double host_bytes) {
  const StageMemoryEstimate e = largest_stage_memory(c);
  if (e.total() <= host_bytes) return std::nullopt;
  constexpr double GiB = 1024.0 * 1024.0 * 1024.0;
  const auto& m = c.model;
  std::string what = fmt::format(
      "the largest pipeline stage needs at least {:.1f} GiB of host memory ({:.1f} GiB of "
      "parameters{} for model.layers {}, model.d_model {}, model.vocab {} over "
      "pipeline.stages {}",
      e.total() / GiB, e.state_bytes / GiB,
      c.devices.kind == "cpu" ? " with gradients and AdamW moments" : ", built on the host",
      m.layers, m.d_model, m.vocab, c.pipeline.stages);
  if (e.activation_bytes > 0)
    what += fmt::format("; {:.1f} GiB of activations of one micro-batch of "
                        "pipeline.micro_batch_size {} x model.seq_len {}",
                        e.activation_bytes / GiB, c.pipeline.micro_batch_size, m.seq_len);
  what += fmt::format("), this machine has {:.1f} GiB: use a smaller model or micro-batch, "
                      "or more pipeline.stages",
                      host_bytes / GiB);
  return what;
}

std::optional<double> host_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string name;
    double kib = 0;
    if (fields >> name >> kib && name == "MemTotal:") return kib * 1024.0;
  }
  return std::nullopt;
}

void check_host_memory(const RunConfig& config) {
  const auto host = host_memory_bytes();
  if (!host) return;
  if (auto problem = host_memory_problem(config, *host)) throw InputError(*problem);
}

}  // namespace conveyor
