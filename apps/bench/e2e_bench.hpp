#pragma once
// `conveyor bench e2e CONFIG`: end-to-end training throughput of a config — tokens/s,
// step time, model TFLOP/s per device, peak memory per device and the measured bubble —
// from a short real run (no run folder, no weights file).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace conveyor {

struct E2eOptions {
  std::string config = "configs/tiny.yaml";
  std::vector<std::string> overrides;
  std::int64_t steps = 10;
  std::int64_t warmup = 2;  // steps left out of the figures
};

/// Figures: step_ms (the median counted step: the upper one of an even count) and
/// tokens_per_s of that same step (tokens_per_step / step_ms * 1000), tflops_per_gpu
/// (model FLOPs: 3 × forward matmuls and attention), peak_memory_gib (per device: the
/// caching allocator's reserved high-water mark on GPUs, the process' peak RSS on the CPU),
/// bubble (host-side timings), steps, devices.
nlohmann::json run_e2e_bench(const E2eOptions& options);

}  // namespace conveyor
