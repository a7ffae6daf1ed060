#include "apps/train/job_builder.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "actors/plan/pipeline_layout.hpp"
#include "actors/trace/fault_spec.hpp"
#include "apps/train/device_models.hpp"
#include "apps/train/memory_preflight.hpp"
#include "apps/train/partition_choice.hpp"
#include "kernels/common/error.hpp"

namespace conveyor {

TrainingJob build_training_job(const RunConfig& config, int processes) {
  check_host_memory(config, processes);  // before anything large is built
  TrainingJob job;
  job.model = config.model;

  auto corpus = std::make_shared<TokenCorpus>(
      TokenCorpus::load(config.data.path, config.data.format, config.model.vocab,
                        static_cast<int>(config.data.token_bytes)));
  try {
    job.data.splits = split_corpus(*corpus, config.data.val_fraction, config.model.seq_len);
  } catch (const InputError& e) {
    throw InputError(config.data.path + ": " + e.what() + " (check data.path)");
  }
  job.data.corpus = std::move(corpus);
  job.data.seed = config.train.seed;
  job.data.micro_batch_size = config.pipeline.micro_batch_size;
  job.data.micro_batches = static_cast<int>(config.pipeline.micro_batches);
  job.replicas = static_cast<int>(config.parallel.data);
  job.collective_timeout_s = config.transport.timeout_s;
  job.shard_optimizer_state = config.optim.shard_state;

  const PartitionChoice partition = choose_partition(config);
  auto layout = make_pipeline_layout(schedule_spec_of(config), static_cast<int>(config.model.layers),
                                     partition.halves_per_stage);
  job.partition = std::string(enum_name(partition.mode));  // TrainingJob keeps the name
  job.partition_reason = partition.reason;
  if (partition.mode == PartitionMode::automatic) fmt::print(stderr, "conveyor train: {}\n", partition.reason);
  job.schedule = std::move(layout.schedule);
  job.placement = std::move(layout.placement);
  assign_devices(config, job.placement);
  if (job.replicas > 1) job.actor_devices = actor_devices(config, job.stage_actors());
  job.make_model = stage_model_factory(config);
  job.data.activation_dtype = activation_dtype(config);

  job.adamw.beta1 = static_cast<float>(config.train.beta1);
  job.adamw.beta2 = static_cast<float>(config.train.beta2);
  job.adamw.weight_decay = static_cast<float>(config.train.weight_decay);
  job.lr = LrSchedule{config.train.lr, config.train.lr_min, config.train.warmup_steps,
                      config.train.steps};
  job.grad_clip = config.train.grad_clip;
  job.steps = config.train.steps;
  job.eval_every = config.train.eval_every;
  job.eval_batches = static_cast<int>(config.train.eval_batches);
  job.threads_per_stage = static_cast<int>(config.runtime.threads_per_stage);
  job.detached_stages = config.runtime.stage_threads == StageThreads::detached;
  job.watchdog_timeout_s = config.watchdog.timeout_s;
  job.on_nan = config.fault.on_nan;
  job.recovery.policy = config.fault.policy;
  job.recovery.snapshot_every = static_cast<int>(config.fault.snapshot_every);
  job.recovery.buddy_copies = config.fault.buddy_copies;
  job.nodes_write_shards = config.checkpoint.writers == CheckpointWriters::every_node;
  job.checkpoint_every = config.checkpoint.every;
  job.remote_shard_timeout = std::chrono::milliseconds(
      static_cast<std::int64_t>(std::ceil(config.checkpoint.remote_timeout_s * 1000)));
  job.recovery.max_restarts = static_cast<int>(config.fault.max_restarts);
  job.recovery.window_s = config.fault.window_s;
  if (!config.fault.inject.empty()) job.fault = std::make_shared<ScriptedFaults>(config.fault.inject);
  return job;
}

}  // namespace conveyor
