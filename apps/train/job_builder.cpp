#include "apps/train/job_builder.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "actors/plan/pipeline_layout.hpp"
#include "apps/train/device_models.hpp"
#include "apps/train/memory_preflight.hpp"
#include "apps/train/partition_choice.hpp"
#include "kernels/common/error.hpp"

namespace conveyor {

JobPlan build_job_plan(const RunConfig& config, int processes) {
  check_host_memory(config, processes);  // before anything large is built
  JobPlan plan;
  plan.model = config.model;

  auto corpus = std::make_shared<TokenCorpus>(
      TokenCorpus::load(config.data.path, config.data.format, config.model.vocab,
                        static_cast<int>(config.data.token_bytes)));
  try {
    plan.data.splits = split_corpus(*corpus, config.data.val_fraction, config.model.seq_len);
  } catch (const InputError& e) {
    throw InputError(config.data.path + ": " + e.what() + " (check data.path)");
  }
  plan.data.corpus = std::move(corpus);
  plan.data.seed = config.train.seed;
  plan.data.micro_batch_size = config.pipeline.micro_batch_size;
  plan.data.micro_batches = static_cast<int>(config.pipeline.micro_batches);
  plan.replicas = static_cast<int>(config.parallel.data);
  plan.collective_timeout_s = config.transport.timeout_s;
  plan.shard_optimizer_state = config.optim.shard_state;

  const PartitionChoice partition = choose_partition(config);
  auto layout = make_pipeline_layout(schedule_spec_of(config), static_cast<int>(config.model.layers),
                                     partition.halves_per_stage);
  plan.partition = std::string(enum_name(partition.mode));  // the plan keeps the name
  plan.partition_reason = partition.reason;
  if (partition.mode == PartitionMode::automatic) fmt::print(stderr, "conveyor train: {}\n", partition.reason);
  plan.schedule = std::move(layout.schedule);
  plan.placement = std::move(layout.placement);
  assign_devices(config, plan.placement);
  if (plan.replicas > 1) plan.actor_devices = actor_devices(config, plan.stage_actors());
  plan.make_model = stage_model_factory(config);
  plan.data.activation_dtype = activation_dtype(config);

  plan.adamw.beta1 = static_cast<float>(config.train.beta1);
  plan.adamw.beta2 = static_cast<float>(config.train.beta2);
  plan.adamw.weight_decay = static_cast<float>(config.train.weight_decay);
  plan.lr = LrSchedule{config.train.lr, config.train.lr_min, config.train.warmup_steps,
                      config.train.steps};
  plan.grad_clip = config.train.grad_clip;
  plan.steps = config.train.steps;
  plan.eval_every = config.train.eval_every;
  plan.eval_batches = static_cast<int>(config.train.eval_batches);
  plan.threads_per_stage = static_cast<int>(config.runtime.threads_per_stage);
  plan.detached_stages = config.runtime.stage_threads == StageThreads::detached;
  plan.watchdog_timeout_s = config.watchdog.timeout_s;
  plan.on_nan = config.fault.on_nan;
  plan.recovery.policy = config.fault.policy;
  plan.recovery.snapshot_every = static_cast<int>(config.fault.snapshot_every);
  plan.recovery.buddy_copies = config.fault.buddy_copies;
  plan.recovery.leader_failover = config.fault.leader_failover;
  plan.nodes_write_shards = config.checkpoint.writers == CheckpointWriters::every_node;
  plan.checkpoint_every = config.checkpoint.every;
  plan.remote_shard_timeout = std::chrono::milliseconds(
      static_cast<std::int64_t>(std::ceil(config.checkpoint.remote_timeout_s * 1000)));
  plan.recovery.max_restarts = static_cast<int>(config.fault.max_restarts);
  plan.recovery.window_s = config.fault.window_s;
  plan.recovery.shrink = config.fault.shrink;
  plan.recovery.grow = config.fault.grow;
  return plan;
}

}  // namespace conveyor
