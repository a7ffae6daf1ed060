#include "apps/bench/e2e_bench.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <sys/resource.h>

#include "actors/runtime/run_job.hpp"
#include "apps/config/config_loader.hpp"
#include "apps/config/precision_recipe.hpp"
#include "apps/train/job_builder.hpp"
#include "kernels/common/error.hpp"

#if CONVEYOR_WITH_CUDA
#include "kernels/cuda/allocator.hpp"
#endif

namespace conveyor {
namespace {

// Collects every step's metrics and shows each on stderr as it ends (stdout holds the JSON).
struct Collect final : TrainingObserver {
  int total = 0, warmup = 0;
  std::vector<StepMetrics> steps;
  void on_step(const StepMetrics& m, const std::vector<StageReport>&) override {
    steps.push_back(m);
    fmt::print(stderr, "bench e2e: step {}/{}: {:.1f} ms, {:.0f} tokens/s, loss {:.4f}{}\n",
               m.step + 1, total, m.step_ms, m.tokens_per_s, m.loss,
               m.step < warmup ? " (warm-up, not counted)" : "");
  }
  void on_eval(const EvalMetrics&) override {}
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

nlohmann::json run_e2e_bench(const E2eOptions& o) {
  if (o.steps <= o.warmup)
    throw InputError("--steps: " + std::to_string(o.steps) + " must exceed the " +
                     std::to_string(o.warmup) + " warm-up steps");
  auto overrides = o.overrides;
  overrides.push_back("train.steps=" + std::to_string(o.steps));
  overrides.push_back("train.eval_every=0");
  overrides.push_back("train.eval_batches=1");
  const RunConfig config = load_run_config(o.config, overrides);
  const Job job{build_job_plan(config), {}};

  // Every stage actor's GPU (with replicas, each replica's).
  std::set<int> gpus;
  for (int a = 0; a < job.plan.stage_actors(); ++a)
    if (const Device d = job.plan.actor_placement(a).device; !d.is_cpu()) gpus.insert(d.index);
#if CONVEYOR_WITH_CUDA
  // Peaks of this run alone: an earlier run in this process (bench model) left its
  // blocks cached.
  for (int g : gpus) {
    cuda_allocator(g).empty_cache();
    cuda_allocator(g).reset_peak();
  }
#endif
  Collect collect;
  collect.total = o.steps;
  collect.warmup = o.warmup;
  fmt::print(stderr, "bench e2e: {}: building {} stage actor(s), then {} steps ({} warm-up)\n",
             o.config, job.plan.stage_actors(), o.steps, o.warmup);
  run_training(job, collect);

  std::vector<double> ms, bubble, allreduce, exposed;
  for (const auto& s : collect.steps)
    if (s.step >= o.warmup) {
      ms.push_back(s.step_ms);
      bubble.push_back(s.bubble);
      allreduce.push_back(s.allreduce_ms);
      exposed.push_back(s.allreduce_exposed_ms);
    }
  if (ms.size() < 3)
    fmt::print(stderr,
               "bench e2e: warning: {} step(s) counted after the {} warm-up steps: not a "
               "steady-state figure (give --steps {} or more)\n",
               ms.size(), o.warmup, o.warmup + 3);
  const int devices = gpus.empty() ? 1 : static_cast<int>(gpus.size());
  const double flops_per_token = 3.0 * gpt_forward_flops_per_token(job.plan.model);
  // Both from the one median step: separate medians of step_ms and tokens_per_s come
  // from different steps when the count is even (the upper median of one is the lower
  // median of the other), and would not agree with each other.
  const double step_ms = median(ms);
  const auto tokens_per_step = static_cast<double>(job.plan.tokens_per_step());
  const double tokens_per_s = step_ms > 0 ? tokens_per_step / step_ms * 1e3 : 0.0;

  // Per GPU: what the caching allocator held from the device at its peak (reserved), and
  // the peak of what callers held (allocated: PyTorch's max_memory_allocated measures this).
  nlohmann::json peak = nlohmann::json::array(), peak_allocated = nlohmann::json::array();
#if CONVEYOR_WITH_CUDA
  for (int g : gpus) {
    const auto stats = cuda_allocator(g).stats();
    peak.push_back(stats.peak_reserved / double(1 << 30));
    peak_allocated.push_back(stats.peak_in_use / double(1 << 30));
  }
#endif
  if (gpus.empty()) {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    peak.push_back(u.ru_maxrss * 1024.0 / double(1 << 30));  // ru_maxrss is in KiB
  }
  nlohmann::json out{{"bench", "e2e"},
          {"config", o.config},
          {"schedule", std::string(enum_name(config.pipeline.schedule))},
          {"stages", config.pipeline.stages},
          {"replicas", config.parallel.data},
          {"devices", devices},
          {"device_kind", std::string(enum_name(config.devices.kind))},
          {"master", std::string(enum_name(config.optim.master))},
          {"grad_dtype", std::string(enum_name(config.optim.grad_dtype))},
          {"precision", precision_recipe(config.precision)},
          {"recompute", std::string(recompute_name(config.model.recompute))},
          {"steps", o.steps},
          {"counted_steps", ms.size()},
          {"tokens_per_step", job.plan.tokens_per_step()},
          {"tokens_per_s", tokens_per_s},
          {"step_ms", step_ms},
          {"tflops_per_gpu", tokens_per_s * flops_per_token / devices / 1e12},
          {"peak_memory_gib", peak},
          {"peak_allocated_gib", peak_allocated},
          {"bubble", median(bubble)},
          {"bubble_note", "host-side action timings; on GPUs this is launch time, not GPU idle time"}};
  if (job.plan.replicas > 1) {
    // Gradient averaging per step (mean over stage actors; medians over the counted steps):
    // the reductions' own time, what the stages still waited for after their compute, and
    // the share of it hidden behind backward.
    const double busy = median(allreduce), waited = median(exposed);
    out["allreduce_ms"] = busy;
    out["allreduce_exposed_ms"] = waited;
    out["allreduce_hidden"] = busy > 0.0 ? std::clamp(1.0 - waited / busy, 0.0, 1.0) : 0.0;
  }
  return out;
}

}  // namespace conveyor
