#include "apps/bench/kernel_bench.hpp"

#include <fmt/format.h>

#include "apps/config/config_loader.hpp"
#include "apps/train/device_models.hpp"
#include "kernels/common/error.hpp"

#if CONVEYOR_WITH_CUDA
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/bench/kernel_timings.hpp"
#include "kernels/cuda/model/cuda_stage_model.hpp"
#endif

namespace conveyor {

nlohmann::json run_kernel_bench(const KernelBenchArgs& args) {
  if (args.repeats < 1 || args.repeats > kMaxKernelRepeats)
    throw InputError("--repeats: " + std::to_string(args.repeats) + " not in range 1 to " +
                     std::to_string(kMaxKernelRepeats));
  const RunConfig config = load_run_config(args.config, args.overrides);
#if !CONVEYOR_WITH_CUDA
  throw InputError("bench kernels: this conveyor was built without CUDA (no nvcc at build time)");
#else
  if (!cuda_device_available(args.device))
    throw InputError("bench kernels: --device " + std::to_string(args.device) +
                     ": no such CUDA device (no GPU, no driver, or index out of range)");
  // runtime.attention picks whose attention the attention rows time (cuDNN's, or conveyor's
  // kernels); a shape cuDNN refuses is timed on the kernels, with the warning on stderr.
  set_attention_backend(cuda_stage_options(config).attention);
  KernelBenchOptions options;
  options.model = config.model;
  options.micro_batch_size = config.pipeline.micro_batch_size;
  options.device = args.device;
  options.repeats = args.repeats;
  const auto timings = time_model_kernels(options);

  const double micro_batches = static_cast<double>(config.pipeline.micro_batches);
  nlohmann::json rows = nlohmann::json::array();
  double step_ms = 0.0;
  for (const auto& t : timings) {
    const bool math = t.flops > 0;
    const double rate = math ? t.flops / (t.ms * 1e-3) / 1e12 : t.bytes / (t.ms * 1e-3) / 1e12;
    const double per_step = t.group == "optimizer" ? t.per_step : t.per_step * micro_batches;
    // The two optimizer recipes are alternatives, and so are the two gradient types: count
    // the configured ones.
    // A row names its recipe as the config does (its label is empty when it serves both).
    const bool counted = (t.master.empty() || t.master == enum_name(config.optim.master)) &&
                         (t.grad_dtype.empty() || t.grad_dtype == enum_name(config.optim.grad_dtype));
    if (counted) step_ms += t.ms * per_step;
    rows.push_back({{"kernel", t.name},
                    {"group", t.group},
                    {"ms", t.ms},
                    {math ? "tflops" : "tbps", rate},
                    {"ceiling_share", rate / (math ? kBf16MatrixTflops : kCopyTBps)},
                    {"launches_per_step", per_step},
                    {"ms_per_step", counted ? t.ms * per_step : 0.0}});
  }
  return {{"bench", "kernels"},
          {"config", args.config},
          {"micro_batch_size", config.pipeline.micro_batch_size},
          {"micro_batches", config.pipeline.micro_batches},
          {"master", std::string(enum_name(config.optim.master))},
          {"grad_dtype", std::string(enum_name(config.optim.grad_dtype))},
          {"attention", std::string(enum_name(config.runtime.attention))},
          {"ceilings", {{"bf16_tflops", kBf16MatrixTflops}, {"copy_tbps", kCopyTBps}}},
          {"kernels", rows},
          {"kernel_ms_per_step_one_gpu", step_ms}};
#endif
}

std::string format_kernel_table(const nlohmann::json& r) {
  std::string out = fmt::format("{:<44} {:>9} {:>14} {:>8} {:>11}\n", "kernel", "ms",
                                "rate", "ceiling", "ms/step");
  for (const auto& row : r.at("kernels")) {
    const bool math = row.contains("tflops");
    out += fmt::format("{:<44} {:>9.3f} {:>8.1f} {:<5} {:>7.0f}% {:>11.1f}\n",
                       row.at("kernel").get<std::string>(), row.at("ms").get<double>(),
                       math ? row.at("tflops").get<double>() : row.at("tbps").get<double>(),
                       math ? "TF/s" : "TB/s", 100.0 * row.at("ceiling_share").get<double>(),
                       row.at("ms_per_step").get<double>());
  }
  out += fmt::format(
      "kernel time of one train step on one GPU ({} micro-batches, attention: {}): {:.1f} ms\n",
      r.at("micro_batches").get<int>(), r.value("attention", std::string("?")),
      r.at("kernel_ms_per_step_one_gpu").get<double>());
  return out;
}

}  // namespace conveyor
