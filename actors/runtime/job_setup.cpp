#include "actors/runtime/job_setup.hpp"

#include <chrono>
#include <stdexcept>

#include "actors/job/replica_groups.hpp"
#include "actors/plan/node_replacement.hpp"
#include "actors/stage/own_shard_write.hpp"

namespace conveyor {
namespace {

// Buddy copies of snapshots on node 0 (fault.buddy_copies), and with them the rejoin of a
// lost process, cover host-memory stages: a GPU stage's state is too large to copy every
// step. Without them stages recover in place (GPU stages' NCCL edges rebuilt) from their
// own process's snapshots, and a checkpoint asks for copies of the step it writes.
bool buddy_copies(const JobPlan& plan) {
  if (plan.recovery.buddy_copies == BuddyCopies::on && !plan.all_cpu())
    throw std::invalid_argument(
        "fault.buddy_copies: on needs every stage on the CPU (node 0 keeps copies of "
        "host-memory stages only)");
  return buddy_copies_on(plan.recovery.buddy_copies, plan.all_cpu());
}

std::shared_ptr<ReplicaGroups> replica_groups(const JobPlan& plan, const NodeSetup& setup,
                                              bool across_processes) {
  const std::chrono::milliseconds timeout(static_cast<std::int64_t>(plan.collective_timeout_s * 1000));
  if (!across_processes) return std::make_shared<ReplicaGroups>(plan.replicas, timeout);
  // Each stage's replicas, on whichever nodes, form a Gloo group over the job's store.
  RendezvousClientOptions groups_store = setup.store;
  groups_store.connect_timeout = setup.rendezvous_timeout;
  groups_store.io_timeout = std::chrono::seconds(10);
  return std::make_shared<ReplicaGroups>(plan.replicas, timeout, groups_store, setup.advertise_host);
}

}  // namespace

RecoveryShape recovery_shape(const JobPlan& plan, const NodeSetup& setup, bool across_processes) {
  RecoveryShape shape;
  shape.snapshots = plan.keeps_snapshots();
  // In one process no stage has another node to copy its snapshots to.
  shape.copies = across_processes && shape.snapshots && buddy_copies(plan);
  shape.no_rejoin = no_replacement_reason(ReplacementFacts{
      .nodes = setup.nnodes,
      .policy = plan.recovery.policy,
      .snapshots = shape.snapshots,
      .copies = shape.copies,
      .all_cpu = plan.all_cpu(),
      .checkpoint_every = plan.checkpoint_every,
      .rejoin_timeout_s = std::chrono::duration<double>(setup.rejoin_timeout).count()});
  shape.nodes_write_shards = plan.nodes_write_shards && shape.snapshots && setup.nnodes > 1;
  return shape;
}

std::shared_ptr<const Job> make_job(const JobPlan& plan, JobServices given, const NodeSetup& setup,
                                    const RecoveryShape& shape, bool across_processes) {
  Job job{plan, std::move(given)};
  job.plan.recovery.buddy_copies = shape.copies ? BuddyCopies::on : BuddyCopies::off;  // for the stages
  auto& s = job.services;
  const int actors = plan.stage_actors();  // every replica's stages (replica-major)
  if (shape.snapshots && !s.snapshots)
    s.snapshots = std::make_shared<SnapshotStore>(actors, shape.snapshot_keep(setup.node));
  // Data parallelism: each stage's replicas average their gradients in a group; so do the
  // two holders of the tied embedding (model.tie_embeddings). A stage actor joins its
  // groups as it starts.
  if ((plan.replicas > 1 || plan.model.tie_embeddings) && !s.replica_groups)
    s.replica_groups = replica_groups(plan, setup, across_processes);
  // The hang watchdog runs in the process of node 0 over every rank: its stages publish
  // here, and node k > 0 reports its own to node 0 (actors/cluster/progress_reporter.hpp).
  if (plan.watchdog_timeout_s > 0 && !s.progress)
    s.progress = std::make_shared<trace::ProgressBoard>(actors);
  // checkpoint.writers every_node: node k > 0 writes its own stages' shards.
  if (shape.nodes_write_shards && setup.node != 0 && !s.shard_writes)
    s.shard_writes = std::make_shared<NodeShardWrites>();
  return std::make_shared<const Job>(std::move(job));
}

}  // namespace conveyor
