// conveyor bench overhead [--stages P] [--schedule S] [--micro-batches M] [--steps N]
//                         [--scheduled] [--trace] [--format text|json]
// conveyor bench e2e [CONFIG] [--set KEY=VALUE]... [--steps N] [--warmup W] [--format text|json]
// conveyor bench model [CONFIG] (same options as e2e): one device, then the pipeline
// conveyor bench kernels [CONFIG] [--set KEY=VALUE]... [--device D] [--repeats R] [--format text|json]
// conveyor bench serve [CONFIG] [--set KEY=VALUE]... [--steps N] [--pairs P] [--scrape-ms MS] [--format text|json]
// conveyor bench p2p [--transport all|nccl|cuda-peer|ucx] [--sizes 8KiB,1MiB,...] [--format text|json]
// Benchmarks print figures on stdout (JSON alone with --format json); logs on stderr.
// Every number flag has a range (CLI::Range): a value out of it, or one that is not a
// number, exits 2 with "--flag: Value X not in range A to B" (CLI11 checks the range
// before it converts, so garbage gets the range too, not "Could not convert").
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <memory>

#include "actors/plan/schedule/schedule.hpp"
#include "apps/bench/e2e_bench.hpp"
#include "apps/bench/kernel_bench.hpp"
#include "apps/bench/model_bench.hpp"
#include "apps/bench/overhead_bench.hpp"
#include "apps/bench/p2p_bench.hpp"
#include "apps/bench/serve_bench.hpp"
#include "apps/commands.hpp"
#include "apps/config/config_limits.hpp"
#include "apps/config/config_path.hpp"

namespace conveyor {
namespace {

// JSON alone, or the text form: `text_of` where a bench has its own, else a line a figure.
void print(const nlohmann::json& result, const std::string& format,
           std::string (*text_of)(const nlohmann::json&) = nullptr) {
  if (format == "json") {
    fmt::print("{}\n", result.dump());
  } else if (text_of) {
    fmt::print("{}", text_of(result));
  } else {
    for (const auto& [key, value] : result.items()) fmt::print("{:<20} {}\n", key, value.dump());
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks: figures on stdout");
  bench->require_subcommand(1);

  auto overhead = std::make_shared<OverheadOptions>();
  auto format = std::make_shared<std::string>("text");
  auto* cmd = bench->add_subcommand(
      "overhead",
      "Runtime cost per action: real actors and messages, empty compute; per_action_us is "
      "the median step's wall time over the actions on its critical path (critical_path_actions)");
  cmd->add_option("--stages", overhead->stages, "Pipeline stages (a thread each when detached)")
      ->check(CLI::Range(1, kMaxOverheadStages))
      ->capture_default_str();
  cmd->add_option("--schedule", overhead->schedule, "Schedule")
      ->check(CLI::IsMember(sched::schedule_names()))
      ->capture_default_str();
  cmd->add_option("--micro-batches", overhead->micro_batches, "Micro-batches per step")
      ->check(CLI::Range(std::int64_t{1}, kMaxMicroBatches))
      ->capture_default_str();
  cmd->add_option("--steps", overhead->steps,
                  "Steps; the first 5 are warm-up, left out of the per-action figures (with "
                  "fewer than 7 steps, all but the last)")
      ->check(CLI::Range(2, 1 << 20))
      ->capture_default_str();
  cmd->add_flag_callback(
      "--scheduled", [overhead] { overhead->detached = false; },
      "Stage actors on the work-stealing scheduler (default: a detached thread each)");
  cmd->add_flag("--trace", overhead->trace,
                "Also run with the trace recorder on: per-action cost with and without (a "
                "difference below zero is noise: the recorder costs less than the runs vary)");
  cmd->add_option("--format", *format, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->callback([=] { print(run_overhead_bench(*overhead), *format, format_overhead_text); });

  // e2e and model take the same options: a config, overrides and the step counts.
  auto add_training_bench = [&](const char* name, const char* help, auto run) {
    auto e2e = std::make_shared<E2eOptions>();
    auto* sub = bench->add_subcommand(name, help);
    sub->add_option("config", e2e->config, "YAML config file")
        ->capture_default_str()
        ->check(config_path_check(e2e->config));
    sub->add_option("--set", e2e->overrides, "Override a config key (repeatable)");
    sub->add_option("--steps", e2e->steps, "Steps to run")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    sub->add_option("--warmup", e2e->warmup, "Steps left out of the figures")
        ->check(CLI::Range(0, 1 << 20))
        ->capture_default_str();
    sub->add_option("--format", *format, "text or json")
        ->check(CLI::IsMember({"text", "json"}))
        ->capture_default_str();
    sub->callback([=] { print(run(*e2e), *format); });
  };
  add_training_bench(
      "e2e", "Training throughput of a config: tokens/s, step ms, TFLOP/s and peak memory per device",
      run_e2e_bench);
  add_training_bench(
      "model",
      "A config's model on one device with gradient accumulation, then as its pipeline: "
      "e2e figures for both and the pipeline efficiency",
      run_model_bench);

  auto serve = std::make_shared<ServeBenchOptions>();
  auto* serve_cmd = bench->add_subcommand(
      "serve", "What watching costs: a config trained plain and with --serve, a page and a /metrics "
               "scrape attached, in alternated pairs; tokens/s of both and their ratio");
  serve_cmd->add_option("config", serve->config, "YAML config file")
      ->capture_default_str()
      ->check(config_path_check(serve->config));
  serve_cmd->add_option("--set", serve->overrides, "Override a config key (repeatable)");
  serve_cmd->add_option("--steps", serve->steps, "Steps per run")->check(CLI::Range(5, 1 << 20))->capture_default_str();
  serve_cmd->add_option("--pairs", serve->pairs, "Pairs of runs (plain, served)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  serve_cmd->add_option("--scrape-ms", serve->scrape_ms, "The scraper's period")
      ->check(CLI::Range(10, 600'000))
      ->capture_default_str();
  serve_cmd->add_option("--format", *format, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  serve_cmd->callback([=] { print(run_serve_bench(*serve), *format, format_serve_bench_text); });

  auto kernels = std::make_shared<KernelBenchArgs>();
  auto* kernel_cmd = bench->add_subcommand(
      "kernels", "Every CUDA kernel at a config's shapes: ms, TFLOP/s or TB/s, share of the ceiling");
  kernel_cmd->add_option("config", kernels->config, "YAML config file (its model and micro-batch)")
      ->capture_default_str()
      ->check(config_path_check(kernels->config));
  kernel_cmd->add_option("--set", kernels->overrides,
                         "Override a config key (repeatable): the model's shapes, "
                         "optim.master, optim.grad_dtype, runtime.attention");
  kernel_cmd->add_option("--device", kernels->device, "CUDA device index")
      ->check(CLI::Range(0, kMaxDeviceIndex))
      ->capture_default_str();
  kernel_cmd->add_option("--repeats", kernels->repeats, "Timed launches per kernel")
      ->check(CLI::Range(1, kMaxKernelRepeats))
      ->capture_default_str();
  kernel_cmd->add_option("--format", *format, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  kernel_cmd->callback([=] {
    const auto result = run_kernel_bench(*kernels);
    if (*format == "json")
      fmt::print("{}\n", result.dump());
    else
      fmt::print("{}", format_kernel_table(result));
  });

  auto p2p = std::make_shared<P2pOptions>();
  auto* p2p_cmd = bench->add_subcommand(
      "p2p", "Latency and bandwidth of each tensor channel against its raw library, same run");
  p2p_cmd->add_option("--transport", p2p->transport, "all, nccl, cuda-peer or ucx")
      ->capture_default_str();
  p2p_cmd->add_option("--sizes", p2p->sizes, "Message sizes (4096, 8KiB, 16MiB, ...)")
      ->delimiter(',')
      ->capture_default_str();
  p2p_cmd->add_option("--iterations", p2p->iterations, "Messages per measurement (0: by size)")
      ->check(CLI::Range(0, kMaxP2pIterations))
      ->capture_default_str();
  p2p_cmd->add_option("--repeats", p2p->repeats, "Rounds; the best counts")
      ->check(CLI::Range(1, kMaxP2pRepeats))
      ->capture_default_str();
  p2p_cmd->add_option("--format", *format, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  p2p_cmd->callback([=] {
    const auto result = run_p2p_bench(*p2p);
    if (*format == "json")
      fmt::print("{}\n", result.dump());
    else
      fmt::print("{}", format_p2p_table(result));
  });
}

}  // namespace conveyor
