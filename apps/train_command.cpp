// conveyor train [CONFIG] [--set KEY=VALUE]... [--out DIR] [--format text|json]
// Validates everything first (config, data, schedule, placement), then creates the run
// folder, writes config.yaml and plan.json, trains, and writes weights.safetensors.
// Multi-process: [--nnodes N --node-rank R --rdzv HOST:PORT] [--token T], or the same from
// torchrun, Slurm or Open MPI variables (apps/launch/). Node 0 hosts the rendezvous and the
// coordinator and writes the run folder; other nodes write no files (their log is stderr)
// and print nothing on stdout.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fmt/format.h>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/runtime/run_training.hpp"
#include "apps/commands.hpp"
#include "apps/config/config_loader.hpp"
#include "apps/launch/launch_spec.hpp"
#include "apps/trace/trace_setup.hpp"
#include "apps/train/cluster_session.hpp"
#include "apps/train/job_builder.hpp"
#include "apps/train/metrics_log.hpp"
#include "apps/train/plan_json.hpp"
#include "apps/train/progress.hpp"
#include "apps/train/run_dir.hpp"
#include "kernels/io/safetensors.hpp"

namespace conveyor {
namespace {

struct TrainOptions {
  std::string config = "configs/tiny.yaml";
  std::vector<std::string> overrides;
  std::optional<std::string> out;
  std::string format = "text";
  LaunchFlags launch;                 // --nnodes, --node-rank, --rdzv
  std::optional<std::string> token;   // --token (else CONVEYOR_TOKEN)
};

void run_train(const TrainOptions& opt) {
  const RunConfig config = load_run_config(opt.config, opt.overrides);
  TrainingJob job = build_training_job(config);
  // A job over several processes joins the rendezvous first: a wrong launch fails here,
  // before the run folder exists (apps/train/cluster_session.hpp).
  const auto cluster = join_cluster(opt.launch, opt.token, config, process_environment());
  if (cluster) fmt::print(stderr, "conveyor train: {}\n", cluster->describe());
  if (cluster && cluster->node() != 0) {
    cluster->run(job, nullptr);
    fmt::print(stderr, "conveyor train: node {} done\n", cluster->node());
    return;
  }

  const auto dir = create_run_dir(opt.out);
  if (config.trace.enabled)
    job.trace = open_run_trace(dir, *trace::StepRange::parse(config.trace.steps), job);
  write_file_atomically(dir / "config.yaml", to_yaml(config));
  write_file_atomically(dir / "plan.json", plan_json(job).dump(2) + "\n");

  const double entropy = unigram_entropy(*job.data.corpus);
  fmt::print(stderr,
             "conveyor train: {} layers, d_model {}, {} stages, {} ({} micro-batches of {}), {} "
             "steps; data {} ({} tokens, unigram entropy {:.3f} nats); writing {}\n",
             config.model.layers, config.model.d_model, config.pipeline.stages,
             config.pipeline.schedule, config.pipeline.micro_batches,
             config.pipeline.micro_batch_size, config.train.steps, config.data.path,
             job.data.corpus->size(), entropy, dir.string());

  Progress progress(job.steps, stderr_is_terminal());
  MetricsLog log(dir / "metrics.jsonl", job.schedule, progress);
  const TrainResult result = cluster ? *cluster->run(job, &log) : run_training(job, log);
  progress.finish();

  write_safetensors((dir / "weights.safetensors").string(), result.weights,
                    {{"format", "pt"}, {"producer", "conveyor"}});
  const double simulated = log.replayed_bubble(), simulated_means = log.simulated_bubble();
  const nlohmann::json summary = {{"event", "summary"},
                                  {"steps", job.steps},
                                  {"final_loss", result.final_loss},
                                  {"final_val_loss", result.final_val_loss},
                                  {"unigram_entropy", entropy},
                                  {"tokens_per_s", log.mean_tokens_per_s()},
                                  {"bubble", log.mean_bubble()},
                                  {"simulated_bubble", simulated},
                                  {"simulated_bubble_mean_durations", simulated_means},
                                  {"run_dir", dir.string()}};
  log.event(summary);
  fmt::print(stderr,
             "done: loss {:.4f}, val_loss {:.4f} (unigram entropy {:.4f}), {:.0f} tokens/s, "
             "bubble {:.1f}% measured, {:.1f}% simulated with the measured durations ({:.1f}% with their means); weights in {}\n",
             result.final_loss, result.final_val_loss, entropy, log.mean_tokens_per_s(),
             100 * log.mean_bubble(), 100 * simulated, 100 * simulated_means, (dir / "weights.safetensors").string());
  if (opt.format == "json") fmt::print("{}\n", summary.dump());
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto opt = std::make_shared<TrainOptions>();
  auto* cmd = app.add_subcommand("train", "Train a GPT through a pipeline of stage actors");
  cmd->add_option("config", opt->config, "YAML config file")->capture_default_str();
  cmd->add_option("--set", opt->overrides,
                  "Override a config key with a YAML value, e.g. --set pipeline.stages=2 "
                  "(repeatable)");
  cmd->add_option("--out", opt->out, "Run folder (default runs/<timestamp>/)");
  cmd->add_option("--format", opt->format, "Summary on stdout: text (none) or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->add_option("--nnodes", opt->launch.nnodes,
                  "Processes (nodes) of the job (default: from torchrun, Slurm or Open MPI "
                  "variables, else 1)");
  cmd->add_option("--node-rank", opt->launch.node_rank,
                  "This process's node, 0 .. nnodes-1 (node 0 hosts the rendezvous and the "
                  "coordinator, and writes the run folder)");
  cmd->add_option("--rdzv", opt->launch.rdzv, "HOST:PORT of node 0's rendezvous store");
  cmd->add_option("--token", opt->token,
                  "Job token, the same on every node (default: the CONVEYOR_TOKEN variable)");
  cmd->callback([opt] { run_train(*opt); });
}

}  // namespace conveyor
