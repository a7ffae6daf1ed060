#include "apps/train/memory_preflight.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include "actors/plan/schedule/activations.hpp"
#include "apps/config/schedule_spec.hpp"
#include "kernels/common/error.hpp"

namespace conveyor {
namespace {

constexpr double GiB = 1024.0 * 1024.0 * 1024.0;

// What the schedule says of memory: micro-batches in flight at each rank's peak, chunks
// per rank, and the rank of the last model stage (the head's logits). A schedule that
// cannot be built is refused later, in its place among the other checks: one micro-batch
// in flight, one chunk, the head on the last rank meanwhile.
struct ScheduleShape {
  std::vector<int> peaks;
  int chunks = 1;
  std::size_t head_rank = 0;
};

ScheduleShape schedule_shape(const RunConfig& c) {
  try {
    const sched::Schedule s = sched::make_schedule(schedule_spec_of(c));
    ScheduleShape shape{sched::peak_activations(s), s.chunks_per_rank(), 0};
    for (int r = 0; r < s.spec.stages; ++r)
      for (int chunk = 0; chunk < shape.chunks; ++chunk)
        if (s.model_stage(r, chunk) == s.model_stages() - 1) shape.head_rank = static_cast<std::size_t>(r);
    return shape;
  } catch (const std::exception&) {
    const auto ranks = static_cast<std::size_t>(std::max<std::int64_t>(1, c.pipeline.stages));
    return {std::vector<int>(ranks, 1), 1, ranks - 1};
  }
}

// Every rank's lower bound, in rank order (one replica).
std::vector<StageMemoryEstimate> rank_memory(const RunConfig& c) {
  // In double: a mistyped size (d_model 1e9) must not overflow into a small number.
  const auto& m = c.model;
  const double d = static_cast<double>(m.d_model), V = static_cast<double>(m.vocab);
  const double T = static_cast<double>(m.seq_len), H = static_cast<double>(m.heads);
  const double L = static_cast<double>(m.layers), P = static_cast<double>(c.pipeline.stages);
  // GPT-2: qkv, proj, fc1, fc2 with their biases and two LayerNorms a block; wte, wpe, ln_f
  // and the head (its own copy when tied, on the head's stage). Per token and block kept
  // for the backward: x, ln1, qkv (3d), the attention output, ln2, fc1 and GELU (4d each),
  // 15d floats.
  double params = L * (12.0 * d * d + 13.0 * d) + 2.0 * V * d + T * d + 2.0 * d;
  double block_floats = 15.0 * d;
  if (m.arch == ModelArch::llama) {
    // Llama: qkv (W wide), o, gate_up (2F) and down, and two RMSNorms a block; wte, norm_f
    // and the head. Kept per token: x, the norm, qkv, the attention output; the MLP's
    // input, its norm, gate_up and the SwiGLU output.
    const double W = d + 2.0 * static_cast<double>(m.kv_head_count() * m.head_dim());
    const double F = static_cast<double>(m.llama_ffn_dim());
    params = L * (d * W + d * d + 3.0 * d * F + 2.0 * d) + 2.0 * V * d + d;
    block_floats = 5.0 * d + W + 3.0 * F;
  }
  const bool cpu = c.devices.kind == DeviceKind::cpu;
  const ScheduleShape shape = schedule_shape(c);
  // And H·T attention probabilities; with recomputation, the block's input at least.
  const double kept = m.recompute == Recompute::none ? block_floats + H * T : d;
  const double tokens = static_cast<double>(c.pipeline.micro_batch_size) * T;
  // One (rank, chunk) of a micro-batch: the blocks of one model stage, on average.
  const double per_micro_batch = 4.0 * tokens * kept * (L / (P * shape.chunks));
  std::vector<StageMemoryEstimate> out(shape.peaks.size());
  for (std::size_t r = 0; r < out.size(); ++r) {
    auto& e = out[r];
    e.state_bytes = params / P * (cpu ? 16.0 : 4.0);  // the average rank
    e.in_flight = std::max(1, shape.peaks[r]);
    if (cpu) e.activation_bytes = per_micro_batch * e.in_flight;
  }
  // The head's logits of one micro-batch.
  if (cpu) out.at(shape.head_rank).activation_bytes += 4.0 * tokens * V;
  return out;
}

const StageMemoryEstimate& largest(const std::vector<StageMemoryEstimate>& ranks) {
  return *std::max_element(ranks.begin(), ranks.end(),
                           [](const auto& a, const auto& b) { return a.total() < b.total(); });
}

StageMemoryEstimate sum(const std::vector<StageMemoryEstimate>& ranks, double times) {
  StageMemoryEstimate s;
  s.in_flight = 0;
  for (const auto& r : ranks) {
    s.state_bytes += r.state_bytes * times;
    s.activation_bytes += r.activation_bytes * times;
    s.in_flight = std::max(s.in_flight, r.in_flight);
  }
  return s;
}

}  // namespace

StageMemoryEstimate largest_stage_memory(const RunConfig& c) { return largest(rank_memory(c)); }

StageMemoryEstimate process_memory(const RunConfig& c, int processes) {
  const auto ranks = rank_memory(c);
  const double replicas = static_cast<double>(std::max<std::int64_t>(1, c.parallel.data));
  StageMemoryEstimate all = sum(ranks, replicas);
  if (processes <= 1) return all;
  // Some node holds at least an even share, and some node the largest stage.
  all.state_bytes /= processes;
  all.activation_bytes /= processes;
  return all.total() >= largest(ranks).total() ? all : largest(ranks);
}

std::optional<std::string> host_memory_problem(const RunConfig& c, double host_bytes, int processes) {
  const StageMemoryEstimate e = process_memory(c, processes);
  if (e.total() <= host_bytes) return std::nullopt;
  const auto& m = c.model;
  std::string what = fmt::format(
      "{} needs at least {:.1f} GiB of host memory ({:.1f} GiB of parameters{} for "
      "model.layers {}, model.d_model {}, model.vocab {} over pipeline.stages {}{}",
      processes <= 1 ? std::string("this job, in one process,")
                     : fmt::format("a node of these {} processes", processes),
      e.total() / GiB, e.state_bytes / GiB,
      c.devices.kind == DeviceKind::cpu ? " with gradients and AdamW moments" : ", built on the host",
      m.layers, m.d_model, m.vocab, c.pipeline.stages,
      c.parallel.data > 1 ? fmt::format(", parallel.data {}", c.parallel.data) : std::string());
  if (e.activation_bytes > 0)
    what += fmt::format("; {:.1f} GiB of activations: up to {} micro-batch(es) in flight on a stage under "
                        "pipeline.schedule {}, each of pipeline.micro_batch_size {} x model.seq_len {}",
                        e.activation_bytes / GiB, e.in_flight, enum_name(c.pipeline.schedule),
                        c.pipeline.micro_batch_size, m.seq_len);
  what += fmt::format("), this machine has {:.1f} GiB: use a smaller model or micro-batch{}{}",
                      host_bytes / GiB,
                      c.pipeline.schedule == PipelineSchedule::gpipe ? ", a schedule with fewer in flight (pipeline.schedule 1f1b)" : "",
                      processes <= 1 ? ", or spread the stages over several processes" : ", or more pipeline.stages");
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

void check_host_memory(const RunConfig& config, int processes) {
  const auto host = host_memory_bytes();
  if (!host) return;
  if (auto problem = host_memory_problem(config, *host, processes)) throw InputError(*problem);
}

}  // namespace conveyor
