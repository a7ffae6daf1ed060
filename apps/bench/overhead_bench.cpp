#include "apps/bench/overhead_bench.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <sys/resource.h>
#include <vector>

#include "actors/runtime/empty_stage_model.hpp"
#include "actors/plan/pipeline_layout.hpp"
#include "actors/runtime/run_job.hpp"
#include "actors/plan/schedule/simulator.hpp"
#include "actors/trace/stage_probe.hpp"
#include "actors/trace/trace_session.hpp"
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

// Steps left out of the per-action figures (thread start-up, first allocations), and at
// least one counted: `--steps` starts at 2. The --help of `--steps` says the same.
std::size_t warmup_steps(std::size_t steps) {
  return steps == 0 ? 0 : std::min<std::size_t>(5, steps - 1);
}

struct RunFigures {
  std::vector<double> counted_ms;  // step times after the warm-up
  double cpu_s = 0;                // the whole run's, warm-up included
};

RunFigures measure(const Job& job) {
  RunFigures f;
  StepTimes times;
  const double cpu0 = process_cpu_seconds();
  run_training(job, times);
  f.cpu_s = process_cpu_seconds() - cpu0;
  const std::size_t skip = warmup_steps(times.step_ms.size());
  f.counted_ms.assign(times.step_ms.begin() + static_cast<std::ptrdiff_t>(skip),
                      times.step_ms.end());
  return f;
}

// The recorder's own cost, alone: one action with the message it sends and the one it
// receives, as a stage's thread records them (probe calls, clock reads, ring stores, and
// the batched file writes), averaged over many.
double record_ns_per_action(const std::filesystem::path& dir) {
  trace::TraceOptions t;
  t.dir = dir / "alone";
  trace::TraceSession session(t, 2);
  const Placement placement = make_placement({2, 2}, 2, 1, [](int rank, int) { return rank; });
  trace::StageProbe probe(1, 0, placement, &session.stage(1), nullptr);
  StepPlan plan{1, 0, Phase::train,
                std::make_shared<const std::vector<sched::Action>>(
                    std::vector<sched::Action>{sched::Action::parse("1F0")})};
  probe.plan_received(plan);
  PipeMessage in{PipeKind::activation, 1, 0, Phase::train, 0, 0, 1, Tensor{}};
  PipeMessage out{PipeKind::gradient, 1, 0, Phase::train, 0, 1, 0, Tensor{}};
  constexpr int kActions = 200'000;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kActions; ++i) {
    probe.received(in);
    probe.action_started(plan, 0);
    probe.sending(out, 0);
    probe.action_finished(plan, 0, ActionTiming{plan.actions->front(), i, i + 1});
  }
  session.flush_all();
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() /
         kActions;
}

}  // namespace

nlohmann::json run_overhead_bench(const OverheadOptions& o) {
  if (o.stages < 1 || o.stages > kMaxOverheadStages)
    throw InputError("--stages: " + std::to_string(o.stages) + " not in range 1 to " +
                     std::to_string(kMaxOverheadStages));
  if (o.steps < 2) throw InputError("--steps: must be >= 2, got " + std::to_string(o.steps));
  // One block per model stage: interleaved-1f1b runs 2 chunks per stage here, zbv always 2.
  const bool interleaved = o.schedule == "interleaved-1f1b";
  const int chunks = static_cast<int>(sched::schedule_chunks(o.schedule, interleaved ? 2 : 1));
  Job job;
  job.plan.model = GptConfig{o.stages * chunks, 8, 1, 8, 256};
  std::vector<TokenId> tokens(4096);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<TokenId>(i % 251);
  auto corpus = std::make_shared<const TokenCorpus>(TokenCorpus::from_tokens(std::move(tokens)));
  job.plan.data.splits = split_corpus(*corpus, 0.5, job.plan.model.seq_len);
  job.plan.data.corpus = corpus;
  job.plan.data.micro_batch_size = 1;
  job.plan.data.micro_batches = o.micro_batches;
  auto layout = make_pipeline_layout(
      sched::ScheduleSpec{o.schedule, o.stages, o.micro_batches, interleaved ? 2 : 1},
      static_cast<int>(job.plan.model.layers));
  job.plan.schedule = std::move(layout.schedule);
  job.plan.placement = std::move(layout.placement);
  job.plan.steps = o.steps;
  job.plan.eval_batches = 1;
  job.plan.make_model = empty_stage_model_factory(job.plan.data.micro_batch_size);
  job.plan.detached_stages = o.detached;

  // per_action_us is the wall time of a step over the actions on its critical path: the
  // longest chain of actions each waiting for the one before (on its rank, or for its
  // message), the schedule's makespan when every action takes one unit. Each such action
  // is a message in, an action dispatched and a message out one after another; actions
  // of other ranks meanwhile run in parallel and are not counted again. (Dividing by the
  // busiest rank's actions, as before, counted the pipeline's fill and drain as overhead;
  // dividing by every rank's actions would credit parallel ranks as if they were faster.)
  std::size_t actions_per_step = 0;
  for (const auto& r : job.plan.schedule.ranks) actions_per_step += r.size();
  const double critical_path =
      sched::simulate(job.plan.schedule, sched::SimCosts::uniform(1.0, 1.0, 1.0, 1.0)).makespan;
  const auto per_action_us = [&](const RunFigures& f) { return median(f.counted_ms) * 1e3 / critical_path; };
  const RunFigures plain = measure(job);
  const std::size_t actions = actions_per_step * static_cast<std::size_t>(o.steps);
  double counted_ms = 0;
  for (double ms : plain.counted_ms) counted_ms += ms;
  nlohmann::json result = {{"bench", "overhead"},
          {"schedule", o.schedule},
          {"stages", o.stages},
          {"micro_batches", o.micro_batches},
          {"steps", o.steps},
          {"warmup_steps", warmup_steps(static_cast<std::size_t>(o.steps))},
          {"stage_threads", o.detached ? "detached" : "scheduled"},
          {"actions", actions},
          {"per_action_us", per_action_us(plain)},
          {"per_action_us_mean",
           counted_ms * 1e3 / (critical_path * static_cast<double>(plain.counted_ms.size()))},
          {"critical_path_actions", critical_path},
          {"cpu_us_per_action", plain.cpu_s * 1e6 / static_cast<double>(actions)},
          {"step_us_median", median(plain.counted_ms) * 1e3}};
  if (o.trace) {
    char pattern[] = "/tmp/conveyor_overhead_trace_XXXXXX";
    if (!::mkdtemp(pattern)) throw std::runtime_error("bench overhead --trace: mkdtemp failed");
    trace::TraceOptions t;
    t.dir = pattern;
    job.services.trace = std::make_shared<trace::TraceSession>(t, o.stages);
    const RunFigures traced = measure(job);
    result["record_ns_per_action"] = record_ns_per_action(pattern);
    job.services.trace->flush_all();
    const auto bytes = job.services.trace->bytes_written();
    job.services.trace.reset();
    std::filesystem::remove_all(pattern);
    result["traced_per_action_us"] = per_action_us(traced);
    result["traced_cpu_us_per_action"] = traced.cpu_s * 1e6 / static_cast<double>(actions);
    // Kept as measured, negative too: below zero the recorder's cost is lost in the
    // run-to-run noise (format_overhead_text says so; record_ns_per_action is the figure).
    result["trace_cost_us_per_action"] = per_action_us(traced) - per_action_us(plain);
    result["trace_bytes_per_step"] = static_cast<double>(bytes) / static_cast<double>(o.steps);
  }
  return result;
}

std::string format_overhead_text(const nlohmann::json& result) {
  std::string text;
  for (const auto& [key, value] : result.items()) {
    std::string shown = value.dump();
    // The difference of two noisy medians: below zero the traced run merely happened to
    // be faster, which is no negative cost.
    if (key == "trace_cost_us_per_action" && value.get<double>() < 0)
      shown = "0 (within noise: measured " + shown + ")";
    text += fmt::format("{:<24} {}\n", key, shown);
  }
  return text;
}

}  // namespace conveyor
