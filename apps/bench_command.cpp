// conveyor bench overhead [--stages P] [--schedule S] [--micro-batches M] [--steps N]
//                         [--scheduled] [--format text|json]
// conveyor bench e2e [CONFIG] [--set KEY=VALUE]... [--steps N] [--warmup W] [--format text|json]
// Benchmarks print figures on stdout (JSON alone with --format json); logs on stderr.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <memory>

#include "apps/bench/e2e_bench.hpp"
#include "apps/bench/overhead_bench.hpp"
#include "apps/commands.hpp"

namespace conveyor {
namespace {

void print(const nlohmann::json& result, const std::string& format) {
  if (format == "json") {
    fmt::print("{}\n", result.dump());
    return;
  }
  for (const auto& [key, value] : result.items()) fmt::print("{:<20} {}\n", key, value.dump());
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks: figures on stdout");
  bench->require_subcommand(1);

  auto overhead = std::make_shared<OverheadOptions>();
  auto format = std::make_shared<std::string>("text");
  auto* cmd = bench->add_subcommand(
      "overhead", "Runtime cost per action: real actors and messages, empty compute");
  cmd->add_option("--stages", overhead->stages, "Pipeline stages")->capture_default_str();
  cmd->add_option("--schedule", overhead->schedule, "Schedule")->capture_default_str();
  cmd->add_option("--micro-batches", overhead->micro_batches, "Micro-batches per step")
      ->capture_default_str();
  cmd->add_option("--steps", overhead->steps, "Steps")->capture_default_str();
  cmd->add_flag_callback(
      "--scheduled", [overhead] { overhead->detached = false; },
      "Stage actors on the work-stealing scheduler (default: a detached thread each)");
  cmd->add_option("--format", *format, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->callback([=] { print(run_overhead_bench(*overhead), *format); });

  auto e2e = std::make_shared<E2eOptions>();
  auto* end_to_end = bench->add_subcommand(
      "e2e", "Training throughput of a config: tokens/s, step ms, TFLOP/s and peak memory per device");
  end_to_end->add_option("config", e2e->config, "YAML config file")->capture_default_str();
  end_to_end->add_option("--set", e2e->overrides, "Override a config key (repeatable)");
  end_to_end->add_option("--steps", e2e->steps, "Steps to run")->capture_default_str();
  end_to_end->add_option("--warmup", e2e->warmup, "Steps left out of the figures")
      ->capture_default_str();
  end_to_end->add_option("--format", *format, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  end_to_end->callback([=] { print(run_e2e_bench(*e2e), *format); });
}

}  // namespace conveyor
