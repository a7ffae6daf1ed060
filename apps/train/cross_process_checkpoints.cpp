#include "apps/train/cross_process_checkpoints.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "apps/launch/replica_nodes.hpp"
#include "kernels/common/error.hpp"

namespace conveyor {
namespace {

bool spans_processes(const RunConfig& config, const LaunchSpec& spec) {
  return spec.nnodes > 1 || config.transport.kind == TransportKind::ucx;
}

bool keeps_snapshots(const RunConfig& config) {
  return config.fault.snapshot_every > 0 &&
         (config.fault.policy == FaultPolicy::restart || config.fault.on_nan == NanPolicy::rollback);
}

// Replica 0's stages are asked for their state: they must all run on node 0.
std::optional<std::string> replica_refusal(const RunConfig& config, int nnodes) {
  const ReplicaLayout layout{static_cast<int>(config.parallel.data),
                             static_cast<int>(config.pipeline.stages)};
  const auto nodes = nodes_of_replica(node_of_actor(config, nnodes), layout, 0);
  if (nodes == std::vector<int>{0}) return std::nullopt;
  return fmt::format(
      "with parallel.data: {} node 0 writes the checkpoints from replica 0's stages, which "
      "must all run on node 0, but they run on nodes {} (pipeline.stages {}, {} stages per "
      "node: give each node whole replicas)",
      config.parallel.data, fmt::join(nodes, ", "), config.pipeline.stages,
      config.devices.per_node > 0 ? config.devices.per_node : layout.actors() / nnodes);
}

}  // namespace

std::optional<std::string> cross_process_checkpoint_refusal(const RunConfig& config,
                                                            const LaunchSpec& spec,
                                                            bool with_every) {
  if (!spans_processes(config, spec)) return std::nullopt;
  if (config.parallel.data > 1 && !config.optim.shard_state)
    return replica_refusal(config, spec.nnodes);
  const bool every_ok = !with_every || (config.fault.snapshot_every > 0 &&
                                        config.checkpoint.every % config.fault.snapshot_every == 0);
  if (keeps_snapshots(config) && every_ok) return std::nullopt;
  return fmt::format(
      "node 0 writes the checkpoints of every node from the in-memory snapshots, so "
      "fault.snapshot_every must be > 0 {} (fault.snapshot_every is {}, fault.policy {}){}",
      with_every ? "(with fault.policy restart) and divide checkpoint.every" : "with fault.policy restart",
      config.fault.snapshot_every,
      enum_name(config.fault.policy),
      config.optim.shard_state && config.parallel.data > 1
          ? "; with optim.shard_state every replica holds a part of the AdamW state"
          : "");
}

void check_checkpoints_across_processes(const RunConfig& config, const LaunchSpec& spec) {
  if (config.checkpoint.writers == CheckpointWriters::every_node && spans_processes(config, spec) && config.parallel.data > 1 &&
      config.optim.shard_state)
    throw InputError(fmt::format(
        "checkpoint.writers: every_node cannot be used with optim.shard_state and parallel.data {}: each "
        "stage's AdamW state is split over its replicas, and node 0 merges the parts into one shard "
        "(use checkpoint.writers: node0)",
        config.parallel.data));
  // --resume needs nothing of this: each node loads its own stages.
  if (config.checkpoint.every <= 0) return;
  const auto refusal = cross_process_checkpoint_refusal(config, spec, true);
  if (!refusal) return;
  throw InputError(fmt::format("checkpoint.every: {} with {}: {}", config.checkpoint.every,
                               spec.nnodes > 1 ? fmt::format("nnodes {}", spec.nnodes)
                                               : std::string("transport.kind ucx"),
                               *refusal));
}

StopPlan stop_plan(const RunConfig& config, const LaunchSpec& spec) {
  StopPlan plan;
  if (!spans_processes(config, spec)) return plan;
  plan.refusal = cross_process_checkpoint_refusal(config, spec, /*with_every=*/false);
  plan.checkpoints = !plan.refusal;
  // Snapshot copies reach node 0 at snapshot steps only (replicas keep none: theirs are
  // asked of the stages at any boundary).
  const bool from_snapshots = config.parallel.data <= 1 || config.optim.shard_state;
  if (plan.checkpoints && from_snapshots) plan.every_steps = config.fault.snapshot_every;
  return plan;
}

}  // namespace conveyor
