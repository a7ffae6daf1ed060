// conveyor train [CONFIG] [--set KEY=VALUE]... [--out DIR] [--format text|json]
// Validates everything first (config, data, schedule, placement), then creates the run
// folder, writes config.yaml and plan.json, trains, and writes weights.safetensors.
// Multi-process: [--nnodes N --node-rank R --rdzv HOST:PORT] [--token T], or the same from
// torchrun, Slurm or Open MPI variables (apps/launch/). Node 0 hosts the rendezvous and the
// coordinator and writes the run folder; other nodes write no files (their log is stderr)
// and print nothing on stdout.
// Checkpoints (docs/CHECKPOINTS.md): every checkpoint.every steps in the background, and
// on SIGTERM or a first Ctrl-C before a clean exit 0; --resume PATH|latest continues a run
// exactly. --init-from PATH starts a new run from another's weights or a Hugging Face
// folder's (apps/train/init_from.hpp): fine-tuning.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/runtime/run_job.hpp"
#include "apps/commands.hpp"
#include "apps/config/config_loader.hpp"
#include "apps/config/config_path.hpp"
#include "apps/launch/launch_spec.hpp"
#include "apps/launch/replica_nodes.hpp"
#include "apps/trace/trace_setup.hpp"
#include "apps/train/cluster_session.hpp"
#include "apps/train/cross_process_checkpoints.hpp"
#include "apps/train/node_replacement.hpp"
#include "apps/train/folder_lock.hpp"
#include "apps/train/init_from.hpp"
#include "apps/train/job_builder.hpp"
#include "apps/train/metrics_log.hpp"
#include "apps/train/plan_json.hpp"
#include "apps/train/preemption.hpp"
#include "apps/train/progress.hpp"
#include "apps/train/resume_hint.hpp"
#include "apps/train/resume_job.hpp"
#include "apps/train/run_dir.hpp"
#include "apps/train/supervisor.hpp"
#include "apps/exit_code.hpp"
#include "apps/train/train_checkpoints.hpp"
#include "apps/train/train_samples.hpp"
#include "apps/train/weights_file.hpp"
#include "apps/watch/status_server.hpp"
#include "actors/fault/fault_spec.hpp"
#include "kernels/common/error.hpp"

namespace conveyor {
namespace {

struct TrainOptions {
  std::string config = "configs/tiny.yaml";
  std::vector<std::string> overrides;
  std::optional<std::string> out;
  std::string format = "text";
  LaunchFlags launch;                 // --nnodes, --node-rank, --rdzv
  std::optional<std::string> token;   // --token (else CONVEYOR_TOKEN)
  std::optional<std::string> resume;  // --resume PATH|latest
  std::optional<std::string> init_from;  // --init-from HF_DIR|RUN_DIR|CKPT_DIR
  bool force = false;                 // --force: resume another run's checkpoint
  bool supervise = false;             // --supervise
  std::optional<std::string> serve;   // --serve [HOST:]PORT (apps/watch/status_server.hpp)
};

// --supervise (apps/train/supervisor.hpp): this process restarts the training process it
// starts until it succeeds. In a job over several processes, a node other than 0 that is
// restarted rejoins the running job where the job takes replacements (node_replacement.hpp);
// node 0 hosts the store and the coordinator, so when it is lost (or a node that cannot
// rejoin) the whole job starts again from the newest checkpoint.
[[noreturn]] void run_supervised(const TrainOptions& opt) {
  const LaunchSpec spec = resolve_launch(opt.launch, process_environment());
  const RunConfig config = load_run_config(opt.config, opt.overrides);  // bad input: exit 2 now
  SupervisedRun run;
  run.out = opt.out ? std::filesystem::path(*opt.out) : unused_run_dir();
  run.checkpoint_dir = checkpoint_folder(config.checkpoint.dir, run.out);
  run.first_resume = opt.resume;
  run.init_from = opt.init_from;
  run.max_restarts = static_cast<int>(config.fault.max_restarts);
  run.args = {"train", opt.config, "--format", opt.format};
  for (const auto& s : opt.overrides) run.args.insert(run.args.end(), {"--set", s});
  if (opt.launch.nnodes) run.args.insert(run.args.end(), {"--nnodes", *opt.launch.nnodes});
  if (opt.launch.node_rank) run.args.insert(run.args.end(), {"--node-rank", *opt.launch.node_rank});
  if (opt.launch.rdzv) run.args.insert(run.args.end(), {"--rdzv", *opt.launch.rdzv});
  if (opt.token) run.args.insert(run.args.end(), {"--token", *opt.token});
  if (opt.force) run.args.push_back("--force");
  if (opt.serve) run.args.insert(run.args.end(), {"--serve", *opt.serve});
  run.rejoins = spec.nnodes > 1 && spec.node_rank != 0 && takes_replacements(config);
  throw ExitStatus{supervise(run)};
}

// GPU stage groups with replicas or the tied embedding live in one process so far (CPU
// groups span processes: they form over the job's store); restarts with replicas over
// processes go through the snapshots.
void refuse_groups_across_processes(const LaunchSpec& spec, const RunConfig& config) {
  if (spec.nnodes <= 1) return;
  if (config.parallel.data > 1 && config.devices.kind != DeviceKind::cpu)
    throw InputError(fmt::format("parallel.data: {}: parallel.data > 1 on GPU stages: one "
                                 "process so far (nnodes {}, devices.kind {})",
                                 config.parallel.data, spec.nnodes, enum_name(config.devices.kind)));
  // Replicas over processes recover through the in-memory snapshots (a replica's state
  // is not copied from another process): they need them.
  if (config.parallel.data > 1 && config.fault.policy == FaultPolicy::restart &&
      config.fault.snapshot_every <= 0)
    throw InputError(fmt::format(
        "parallel.data: {} over {} processes with fault.policy restart: a failed stage restores "
        "its in-memory snapshot (copying a healthy replica is done in one process only), so "
        "fault.snapshot_every must be > 0 (it is {}; or set fault.policy: abort)",
        config.parallel.data, spec.nnodes, config.fault.snapshot_every));
  if (config.model.tie_embeddings && config.devices.kind != DeviceKind::cpu)
    throw InputError(fmt::format("model.tie_embeddings: true on GPU stages: one process so far "
                                 "(nnodes {}, devices.kind {}; CPU stages sum over processes)",
                                 spec.nnodes, enum_name(config.devices.kind)));
}

// An injected process exit names a node of this launch (the config alone does not know
// how many processes there are), and one in a checkpoint write a write that happens: a
// checkpoint after that step, of shards node k > 0 writes itself.
void refuse_exits_that_cannot_happen(const LaunchSpec& spec, const RunConfig& config) {
  for (const FaultSpec& f : config.fault.inject) {
    const std::string& entry = f.text;
    if (f.kind != FaultSpec::Kind::exit) continue;
    if (f.node >= spec.nnodes)
      throw InputError(fmt::format("fault.inject: entry '{}': node {} does not exist: this run has {} "
                                   "process{} (nnodes {}, node ranks from 0)",
                                   entry, f.node, spec.nnodes, spec.nnodes == 1 ? "" : "es", spec.nnodes));
    const bool of_move = f.exit_when == FaultSpec::ExitWhen::relayout || f.exit_when == FaultSpec::ExitWhen::restore;
    if (of_move && spec.nnodes == 1)
      throw InputError(fmt::format("fault.inject: entry '{}': a run in one process never moves onto another "
                                   "layout or restores a node's copy (those happen across processes, --nnodes > 1)",
                                   entry));
    if (f.exit_when != FaultSpec::ExitWhen::checkpoint) continue;
    const auto& c = config.checkpoint;
    if (f.node == 0 || c.writers != CheckpointWriters::every_node || c.every <= 0 || *f.step % c.every != 0)
      throw InputError(fmt::format("fault.inject: entry '{}': node {} writes no shard of a checkpoint after "
                                   "step {} (it needs a node other than 0, checkpoint.writers: every_node "
                                   "and a step that is a multiple of checkpoint.every; here writers {}, "
                                   "every {})",
                                   entry, f.node, *f.step, enum_name(c.writers), c.every));
  }
}

// The folder `--resume latest` looks in, before the run folder exists.
std::string resume_checkpoint_dir(const TrainOptions& opt, const RunConfig& config) {
  if (opt.out) return checkpoint_folder(config.checkpoint.dir, *opt.out).string();
  if (!config.checkpoint.dir.empty()) return config.checkpoint.dir;
  if (opt.resume == "latest")
    throw InputError("--resume latest: give --out RUN_DIR (the run to continue; its checkpoints/ "
                     "is searched) or set checkpoint.dir");
  return "checkpoints";  // unused: a PATH names its folder itself
}

CheckpointSettings checkpoint_settings(const RunConfig& config, const JobPlan& plan,
                                       const std::filesystem::path& dir,
                                       const ResumeSource* resume, const StopPlan& stops) {
  CheckpointSettings s;
  s.stop_every = stops.every_steps;
  s.writes = stops.checkpoints;
  s.dir = checkpoint_folder(config.checkpoint.dir, dir).string();
  s.every = config.checkpoint.every;
  s.keep = static_cast<int>(config.checkpoint.keep);
  s.total_steps = config.train.steps;
  s.first_step = resume ? resume->manifest.step : 0;
  if (resume) s.resumed_layout.emplace(resume->manifest.stages, resume->manifest.partition_halves);
  s.base = manifest_base(plan, std::string(enum_name(config.pipeline.schedule)), to_yaml(config));
  for (auto step : corrupt_checkpoint_steps(config.fault.inject)) s.corrupt_steps.insert(step);
  s.stalled_steps = checkpoint_stalls(config.fault.inject);
  return s;
}

// Paths end up in JSON (metrics rows, plan.json, the checkpoint manifest's config), which
// holds UTF-8 only: a path that is not would fail the run's first checkpoint, or its
// summary after training. Refused at start instead.
void refuse_non_utf8_paths(const TrainOptions& opt, const RunConfig& config) {
  const auto check = [](const std::string& what, const std::string& path) {
    try {
      (void)nlohmann::json(path).dump();
    } catch (const nlohmann::json::type_error&) {
      throw InputError(fmt::format("{}: the path is not valid UTF-8 ({}); rename it", what,
                                   nlohmann::json(path).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace)));
    }
  };
  if (opt.out) check("--out", *opt.out);
  check("data.path", config.data.path);
  check("checkpoint.dir", config.checkpoint.dir);
  if (opt.resume) check("--resume", *opt.resume);
  if (opt.init_from) check("--init-from", *opt.init_from);
}

// A trace file that could not be written whole (a full disk) fails the run once its
// results are saved: it exits 1 saying so instead of leaving a short trace unnoticed.
void check_trace(const JobServices& services) {
  if (!services.trace) return;
  services.trace->flush_all();
  if (const auto failure = services.trace->failure())
    throw std::runtime_error(fmt::format("trace file {}: {}; the trace is incomplete (the run's other "
                                         "results are written)",
                                         services.trace->file().string(), *failure));
}

// A stop (SIGTERM, SIGINT, SIGHUP) ended the run at a step boundary: the stopped row, and
// how to resume, or the signal's exit status when no checkpoint could be written.
void report_stop(const TrainOptions& opt, const Job& job, const StopPlan& stops,
                 TrainCheckpoints& checkpoints, MetricsLog& log, const std::filesystem::path& dir) {
  const auto written = checkpoints.last_written();
  const char* signal = stop_signal_name(stop_signal());
  nlohmann::json stopped = {{"event", "stopped"},
                            {"reason", signal},
                            {"after_step", *checkpoints.stopped_at()},
                            {"checkpoint", written ? nlohmann::json(written->path) : nlohmann::json(nullptr)}};
  if (stop_node() >= 0) stopped["signalled_node"] = stop_node();
  log.event(stopped);
  // A JSON consumer learns the run ended early, and where to resume from.
  if (opt.format == "json") fmt::print("{}\n", stopped.dump());
  if (!stops.checkpoints) {
    // Nothing to resume from: the run ends as the signal asked, in order on every node,
    // with the shell's code for it (128 + the signal).
    fmt::print(stderr, "conveyor train: {}: stopped after step {} of {} without a checkpoint: {}\n",
               stop_reason(), *checkpoints.stopped_at(), job.plan.steps, *stops.refusal);
    check_trace(job.services);
    throw ExitStatus{128 + stop_signal()};
  }
  std::vector<std::string> extra;
  if (opt.format != "text") extra = {"--format", opt.format};
  if (supervised()) extra.push_back("--supervise");  // resumed the way it ran
  fmt::print(stderr,
             "conveyor train: {}: stopped after step {} of {}; checkpoint written to {}\n"
             "to resume, run:\n  {}\n",
             stop_reason(), *checkpoints.stopped_at(), job.plan.steps, written ? written->path : "?",
             resume_command(opt.config, opt.overrides, dir.string(), extra));
  check_trace(job.services);
}

// The end of a run that trained to its last step: the weights, the checkpoints still being
// written, the summary row and line.
void finish_run(const TrainOptions& opt, const Job& job, const TrainResult& result,
                TrainCheckpoints& checkpoints, MetricsLog& log, const std::filesystem::path& dir,
                double entropy) {
  // The weights first; a failure to write them (a full disk) is reported together with
  // the checkpoints that failed, so the last line names every file that was lost.
  std::optional<std::string> weights_failure;
  try {
    write_weights_file((dir / kWeightsFile).string(), result.weights);
  } catch (const std::runtime_error& e) {
    weights_failure = e.what();
  }
  if (result.final_eval_dropped && !weights_failure)
    fmt::print(stderr, "conveyor train: {} during the evaluation after the last step: "
                       "it was dropped ({}); the weights are written\n",
               stop_signal_name(stop_signal()),
               result.final_val_loss ? "final_val_loss is the one before it"
                                     : "no evaluation before it in this run: final_val_loss is null");
  // The weights are safe first; then a background write that failed fails the run (exit 1).
  try {
    checkpoints.flush();
  } catch (const std::exception& e) {
    if (!weights_failure) throw;
    throw std::runtime_error(fmt::format("{}; and {}", *weights_failure, e.what()));
  }
  if (weights_failure)
    throw std::runtime_error(fmt::format("{} (every checkpoint of this run was written)", *weights_failure));
  nlohmann::json lost_checkpoints = nlohmann::json::array();
  for (const auto& lost : checkpoints.lost_with_nodes()) {
    lost_checkpoints.push_back({{"step", lost.step}, {"node", *lost.lost_node}});
    fmt::print(stderr, "conveyor train: the checkpoint of step {} went down with node {} (recovered from); "
                       "the later checkpoints and the weights hold its steps\n", lost.step, *lost.lost_node);
  }
  if (checkpoints.taken() > 0)
    fmt::print(stderr,
               "conveyor train: {} checkpoints; the step loop spent {:.1f} ms on each (in-memory "
               "snapshot; the disk writes ran in the background)\n",
               checkpoints.taken(), checkpoints.step_loop_ms() / checkpoints.taken());
  const double simulated = log.replayed_bubble(), simulated_means = log.simulated_bubble();
  // Null (and "n/a") when every step was a warm-up step: no figure rather than a zero.
  const auto tokens_per_s = log.mean_tokens_per_s();
  const auto bubble = log.mean_bubble();
  const auto or_null = [](const std::optional<double>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  const nlohmann::json summary = {{"event", "summary"},
                                  {"steps", job.plan.steps},
                                  {"final_loss", result.final_loss},
                                  {"final_val_loss", or_null(result.final_val_loss)},
                                  {"unigram_entropy", entropy},
                                  {"tokens_per_s", or_null(tokens_per_s)},
                                  {"bubble", or_null(bubble)},
                                  {"simulated_bubble", simulated},
                                  {"simulated_bubble_mean_durations", simulated_means},
                                  {"lost_checkpoints", lost_checkpoints},
                                  {"run_dir", dir.string()}};
  log.event(summary);
  const std::string speed =
      tokens_per_s ? fmt::format("{:.0f} tokens/s, bubble {:.1f}% measured", *tokens_per_s, 100 * *bubble)
                   : std::string("tokens/s and bubble n/a (the first 2 steps are warm-up, not counted)");
  fmt::print(stderr,
             "done: loss {:.4f}, val_loss {} (unigram entropy {:.4f}), {}, {:.1f}% simulated "
             "with the measured durations ({:.1f}% with their means); weights in {}\n",
             result.final_loss,
             result.final_val_loss ? fmt::format("{:.4f}", *result.final_val_loss) : std::string("n/a"),
             entropy, speed, 100 * simulated,
             100 * simulated_means, (dir / "weights.safetensors").string());
  if (opt.format == "json") fmt::print("{}\n", summary.dump());
  check_trace(job.services);
}

// --resume: the checkpoint, verified and loaded for this process's stages (the whole is
// verified, each process reads the tensors of its own stages only), its models made from
// it. Null without --resume.
std::shared_ptr<const ResumeSource> prepare_resume(const TrainOptions& opt, const RunConfig& config,
                                                   const LaunchSpec& spec, JobPlan& plan) {
  if (!opt.resume) return nullptr;
  const auto here = local_model_stages(plan, node_of_actor(config, spec.nnodes), spec.node_rank);
  const ResumeIdentity who{opt.out ? "--out " + *opt.out : std::string("this config"), opt.force};
  auto resume = load_resume(*opt.resume, resume_checkpoint_dir(opt, config), config, plan, here, who);
  if (opt.out) check_resume_continues(*opt.out, resume->path);
  fmt::print(stderr, "conveyor train: {}\n", resume->description);
  plan.make_model = restoring_models(plan.make_model, resume);
  return resume;
}

// --init-from: the weights, checked against the config and cut to this process's stages,
// which are made from them as a resume's are (at step 0, AdamW fresh). None without it.
std::optional<InitFrom> prepare_init_from(const TrainOptions& opt, const RunConfig& config,
                                          const LaunchSpec& spec, JobPlan& plan) {
  if (!opt.init_from) return std::nullopt;
  const auto here = local_model_stages(plan, node_of_actor(config, spec.nnodes), spec.node_rank);
  InitFrom init = load_init_from(*opt.init_from, config, plan, here);
  fmt::print(stderr, "conveyor train: {}\n", init.stages->description);
  plan.make_model = restoring_models(plan.make_model, init.stages);
  return init;
}

// Node k > 0 of a job over several processes: no run folder of its own, only its trace
// file when traced, into --out/trace/ (one folder for the whole job when --out is shared
// or on one host); node 0 coordinates, writes the results and stops the job.
void run_as_node_k(const TrainOptions& opt, const RunConfig& config, ClusterSession& cluster, Job& job,
                   bool shares_checkpoint_folder) {
  if (shares_checkpoint_folder) cluster.check_shared_checkpoint_folder("");
  if (config.trace.enabled)
    job.services.trace = open_run_trace(create_run_dir(opt.out, /*continuing=*/true),
                                        *trace::StepRange::parse(config.trace.steps), job.plan,
                                        {static_cast<std::uint32_t>(cluster.node()), cluster.clock_offset_ns()});
  catch_stop_signals();  // forwarded to node 0, which stops the whole job (actors/runtime/run_job.hpp)
  if (opt.serve)
    fmt::print(stderr, "conveyor train: --serve: node {} writes no run folder and serves nothing; node 0 serves "
                       "the run\n", cluster.node());
  cluster.run(job, nullptr);
  fmt::print(stderr, "conveyor train: node {} done\n", cluster.node());
}

// The line that says what trains and where its results go.
void print_start(const RunConfig& config, const JobPlan& plan, double entropy, const std::filesystem::path& dir) {
  fmt::print(stderr,
             "conveyor train: {} layers, d_model {}, {} stages, {} ({} micro-batches of {}), {} "
             "steps; data {} ({} tokens, unigram entropy {:.3f} nats); writing {}\n",
             config.model.layers, config.model.d_model, config.pipeline.stages,
             enum_name(config.pipeline.schedule), config.pipeline.micro_batches,
             config.pipeline.micro_batch_size, config.train.steps, config.data.path,
             plan.data.corpus->size(), entropy, dir.string());
}

void run_train(const TrainOptions& opt) {
  // A bad config, a bad --serve value, or a host beyond loopback without a token (serve.token
  // or CONVEYOR_SERVE_TOKEN) exits 2 before anything (before a supervisor starts a child
  // that would fail with it).
  const RunConfig config = load_run_config(opt.config, opt.overrides);
  const auto serve = opt.serve
                         ? std::optional(watch::status_server_spec("--serve", *opt.serve, config.serve.token))
                         : std::nullopt;
  if (opt.supervise) run_supervised(opt);
  refuse_non_utf8_paths(opt, config);
  const LaunchSpec spec = resolve_launch(opt.launch, process_environment());
  Job job{build_job_plan(config, spec.nnodes), {}};
  if (!config.fault.inject.empty()) job.services.fault = std::make_shared<ScriptedFaults>(config.fault.inject);
  check_checkpoints_across_processes(config, spec);
  refuse_groups_across_processes(spec, config);
  refuse_exits_that_cannot_happen(spec, config);
  // On --resume the stage models (CPU or GPU) are built from the checkpoint. Everything
  // here is checked before the run folder exists.
  const auto resume = prepare_resume(opt, config, spec, job.plan);
  const auto init = prepare_init_from(opt, config, spec, job.plan);
  // train.sample_every on token ids: its tokenizer read and checked once, now (a bad one is
  // refused before the run folder exists, not at step N)
  const std::string sample_tokenizer_file = sample_tokenizer(config, opt.init_from);

  // A job over several processes joins the rendezvous first: a wrong launch fails here,
  // before the run folder exists (apps/train/cluster_session.hpp).
  const auto cluster = join_cluster(opt.launch, opt.token, config, process_environment(),
                                    resume ? resume->manifest.step : -1);
  // Injected process exits name a node and fire in a supervised run's first attempt only.
  if (auto scripted = std::dynamic_pointer_cast<ScriptedFaults>(job.services.fault))
    scripted->set_process(cluster ? cluster->node() : 0, supervised_attempt() == 1);
  if (cluster) fmt::print(stderr, "conveyor train: {}\n", cluster->describe());
  // Each node writes its own shards into node 0's checkpoint folder: every node must see it.
  const bool shares_checkpoint_folder =
      cluster && config.checkpoint.writers == CheckpointWriters::every_node && stop_plan(config, spec).checkpoints;
  if (cluster && cluster->node() != 0) {
    run_as_node_k(opt, config, *cluster, job, shares_checkpoint_folder);
    return;
  }

  // Checkpoints are written when they are due and on SIGTERM even with checkpoint.every 0
  // (across processes: where node 0 can write them, cross_process_checkpoints.hpp): a
  // folder that cannot exist must fail now, not when the work would be saved.
  const StopPlan stops = stop_plan(config, spec);
  // The locks are held to the end of the run: another process fails here, naming the
  // folder. The checkpoint folder is locked itself, whatever it is called and wherever it
  // is (flock(2) locks the folder, not its name): the run folder's lock does not cover
  // its checkpoints/, which another run may name as its checkpoint.dir.
  // From here on a SIGTERM is a stop at the next step boundary (a checkpoint), also one
  // that comes while the run folder is being written.
  catch_stop_signals();
  std::optional<FolderLock> checkpoint_lock;
  if (stops.checkpoints && !config.checkpoint.dir.empty()) {
    prepare_checkpoint_dir(config.checkpoint.dir);
    checkpoint_lock.emplace(config.checkpoint.dir, "checkpoint.dir");
  }
  UnstartedRunDir unstarted(opt.out, resume != nullptr);
  const auto& dir = unstarted.path();
  const FolderLock run_lock(dir, "--out");
  if (!resume) refuse_held_run(dir);  // another run may have finished in it since the check
  CheckpointSettings settings = checkpoint_settings(config, job.plan, dir, resume.get(), stops);
  std::optional<DefaultCheckpointFolder> own_checkpoints;
  if (stops.checkpoints && !checkpoint_lock) {
    own_checkpoints.emplace(settings.dir);
    checkpoint_lock.emplace(settings.dir, "checkpoint folder");
  }
  if (shares_checkpoint_folder) cluster->check_shared_checkpoint_folder(settings.dir);
  if (config.trace.enabled)
    job.services.trace = open_run_trace(dir, *trace::StepRange::parse(config.trace.steps), job.plan, {},
                                        cluster ? cluster->node_of_rank() : std::vector<int>{});
  write_file_atomically(dir / "config.yaml", to_yaml(config));
  write_file_atomically(dir / "plan.json",
                        plan_json(job.plan, cluster ? cluster->node_of_rank() : std::vector<int>{})
                                .dump(2) + "\n");

  const double entropy = unigram_entropy(*job.plan.data.corpus);
  print_start(config, job.plan, entropy, dir);

  Progress progress(job.plan.steps, stderr_is_terminal());
  MetricsLog log(dir / "metrics.jsonl", job.plan.schedule, progress, config.fault.straggler_factor,
                 static_cast<int>(config.fault.straggler_steps));
  // The status server reads the run folder on its own thread (apps/watch/): the training
  // never waits for it. It stops when this function returns: the run's end, a stop, an error.
  // Issue 44: each layout a re-plan moves the job onto joins the trace's plans.
  if (config.trace.enabled)
    log.on_relayout([&dir](const JobPlan& p, const std::vector<int>& nodes, int generation) {
      add_run_trace_layout(dir, p, nodes, generation);
    });
  const auto server = serve ? watch::start_status_server(*serve, dir, "conveyor train") : nullptr;
  unstarted.started();
  if (resume)
    log.event({{"event", "resume"}, {"from", resume->path}, {"after_step", resume->manifest.step}});
  if (init)
    log.event({{"event", "init_from"},
               {"from", init->stages->path},
               {"source", init->source},
               {"weights_step", init->weights_step}});
  // One process: every stage model captures its state (CPU, CUDA). Several: node 0 writes
  // every node's state from its snapshot store (check_checkpoints_across_processes), or,
  // where it cannot, a stop ends the job at the next step boundary without one.
  TrainCheckpoints checkpoints(log, std::move(settings), [] { return stop_signal() != 0; });
  TrainSamples samples({config.train.sample_every, config.train.sample_prompt, config.train.sample_tokens,
                        sample_tokenizer_file},
                       log, progress);
  checkpoints.on_written([&log, &samples](const checkpoint::WriteResult& w) {
    log.checkpoint_written(w);
    samples.on_checkpoint(w);
  });
  job.services.checkpoints = &checkpoints;
  const TrainResult result = cluster ? *cluster->run(job, &checkpoints) : run_training(job, checkpoints);
  progress.finish();
  if (checkpoints.stopped_at()) {
    report_stop(opt, job, stops, checkpoints, log, dir);
    return;
  }
  finish_run(opt, job, result, checkpoints, log, dir, entropy);
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto opt = std::make_shared<TrainOptions>();
  auto* cmd = app.add_subcommand("train", "Train a model (GPT-2 or Llama, model.arch) through a pipeline of stage actors");
  cmd->add_option("config", opt->config, "YAML config file")
      ->capture_default_str()
      ->check(config_path_check("configs/tiny.yaml"));
  cmd->add_option("--set", opt->overrides,
                  "Override a config key with a YAML value, e.g. --set pipeline.stages=2 "
                  "(repeatable)");
  cmd->add_option("--out", opt->out, "Run folder (default runs/<timestamp>/)");
  cmd->add_option("--format", opt->format, "Summary on stdout: text (none) or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->add_option("--resume", opt->resume,
                  "Continue from a checkpoint: latest (the newest under checkpoint.dir, by "
                  "default OUT/checkpoints), a run folder, a checkpoint.dir or one step-N "
                  "folder; a corrupt one is skipped for the previous one");
  auto* init_from = cmd->add_option(
      "--init-from", opt->init_from,
      "Start a new run (step 0, fresh optimizer, the data order of train.seed) from the weights of a Hugging "
      "Face model folder (LlamaForCausalLM or GPT2LMHeadModel, read as `hf import` reads it), a run folder or a "
      "checkpoint: fine-tuning. Any stage count or schedule; the config's model must be the weights' (a GPT-2's "
      "model.seq_len may be shorter)");
  cmd->add_flag("--force", opt->force,
                "With --resume: continue a checkpoint written by another run (another seed, "
                "learning rate, data or batch; see docs/CHECKPOINTS.md), with this config")
      ->needs("--resume");
  init_from->excludes("--resume");
  cmd->add_option("--nnodes", opt->launch.nnodes,
                  "Processes (nodes) of the job (default: from torchrun, Slurm or Open MPI "
                  "variables, else 1)");
  cmd->add_option("--node-rank", opt->launch.node_rank,
                  "This process's node, 0 .. nnodes-1 (node 0 hosts the rendezvous and the "
                  "coordinator, and writes the run folder)");
  cmd->add_option("--rdzv", opt->launch.rdzv, "HOST:PORT of node 0's rendezvous store");
  cmd->add_option("--token", opt->token,
                  "Job token, the same on every node (default: the CONVEYOR_TOKEN variable)");
  cmd->add_option("--serve", opt->serve,
                  "Serve the run's status over HTTP while it trains (node 0): /metrics (Prometheus), /api/status, "
                  "/api/events and the live page at /. [HOST:]PORT; PORT alone binds 127.0.0.1, 0 picks a free "
                  "port (the log line names the URL); a host beyond loopback needs serve.token or the CONVEYOR_SERVE_TOKEN variable");
  cmd->add_flag("--supervise", opt->supervise,
                 "Run the training as a child process and start it again from the newest "
                 "checkpoint when it dies (killed, crashed, hung in a kernel), up to "
                 "fault.max_restarts times; on a node other than 0 of a job over several "
                 "processes, the restarted process rejoins the running job, and when node 0 "
                 "is lost every supervised node starts again from the newest checkpoint");
  cmd->callback([opt] { run_train(*opt); });
}

}  // namespace conveyor
