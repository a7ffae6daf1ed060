#include "apps/bench/overhead_bench.hpp"

#include <algorithm>
#include <sys/resource.h>
#include <vector>

#include "actors/runtime/empty_stage_model.hpp"
#include "actors/runtime/pipeline_layout.hpp"
#include "actors/runtime/run_training.hpp"
#include "kernels/common/error.hpp"

namespace conveyor {
namespace {

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

struct StepTimes final : TrainingObserver {
  std::vector<double> step_ms;
  void on_step(const StepMetrics& m, const std::vector<StageReport>&) override {
    step_ms.push_back(m.step_ms);
  }
  void on_eval(const EvalMetrics&) override {}
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

nlohmann::json run_overhead_bench(const OverheadOptions& o) {
  if (o.stages < 1) throw InputError("--stages: must be >= 1, got " + std::to_string(o.stages));
  if (o.steps < 2) throw InputError("--steps: must be >= 2, got " + std::to_string(o.steps));
  // One block per model stage: interleaved-1f1b runs 2 chunks per stage here, zbv always 2.
  const bool interleaved = o.schedule == "interleaved-1f1b";
  const int chunks = interleaved || o.schedule == "zbv" ? 2 : 1;
  TrainingJob job;
  job.model = GptConfig{o.stages * chunks, 8, 1, 8, 256};
  std::vector<std::uint16_t> tokens(4096);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::uint16_t>(i % 251);
  auto corpus = std::make_shared<const TokenCorpus>(TokenCorpus::from_tokens(std::move(tokens)));
  job.data.splits = split_corpus(*corpus, 0.5, job.model.seq_len);
  job.data.corpus = corpus;
  job.data.micro_batch_size = 1;
  job.data.micro_batches = o.micro_batches;
  auto layout = make_pipeline_layout(
      sched::ScheduleSpec{o.schedule, o.stages, o.micro_batches, interleaved ? 2 : 1},
      static_cast<int>(job.model.layers));
  job.schedule = std::move(layout.schedule);
  job.placement = std::move(layout.placement);
  job.steps = o.steps;
  job.eval_batches = 1;
  job.make_model = empty_stage_model_factory(job.data.micro_batch_size);
  job.detached_stages = o.detached;

  std::size_t actions_per_step = 0, longest_rank = 0;
  for (const auto& r : job.schedule.ranks) {
    actions_per_step += r.size();
    longest_rank = std::max(longest_rank, r.size());
  }
  StepTimes times;
  const double cpu0 = process_cpu_seconds();
  run_training(job, times);
  const double cpu = process_cpu_seconds() - cpu0;

  // Skip the first steps (thread start-up, first allocations).
  const std::size_t skip = std::min<std::size_t>(5, times.step_ms.size() - 1);
  std::vector<double> per_action;
  double total_ms = 0;
  for (std::size_t i = skip; i < times.step_ms.size(); ++i) {
    per_action.push_back(times.step_ms[i] * 1e3 / static_cast<double>(longest_rank));
    total_ms += times.step_ms[i];
  }
  const std::size_t actions = actions_per_step * static_cast<std::size_t>(o.steps);
  return {{"bench", "overhead"},
          {"schedule", o.schedule},
          {"stages", o.stages},
          {"micro_batches", o.micro_batches},
          {"steps", o.steps},
          {"stage_threads", o.detached ? "detached" : "scheduled"},
          {"actions", actions},
          {"per_action_us", median(per_action)},
          {"per_action_us_mean", total_ms * 1e3 / (longest_rank * per_action.size())},
          {"cpu_us_per_action", cpu * 1e6 / static_cast<double>(actions)},
          {"step_us_median", median(times.step_ms) * 1e3}};
}

}  // namespace conveyor
