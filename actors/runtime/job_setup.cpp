#include "actors/runtime/job_setup.hpp"

#include <chrono>
#include <stdexcept>

#include "actors/job/replica_groups.hpp"
#include "actors/stage/own_shard_write.hpp"

namespace conveyor {
namespace {

// Buddy copies of snapshots on node 0 (fault.buddy_copies), and with them the rejoin of a
// lost process, cover host-memory stages: a GPU stage's state is too large to copy every
// step. Without them stages recover in place (GPU stages' NCCL edges rebuilt) from their
// own process's snapshots, and a checkpoint asks for copies of the step it writes.
bool buddy_copies(const JobPlan& plan) {
  switch (plan.recovery.buddy_copies) {
    case BuddyCopies::off: return false;
    case BuddyCopies::automatic: return plan.all_cpu();
    case BuddyCopies::on:
      if (!plan.all_cpu())
        throw std::invalid_argument(
            "fault.buddy_copies: on needs every stage on the CPU (node 0 keeps copies of "
            "host-memory stages only)");
      return true;
  }
  return false;
}

// Why a lost node k > 0 cannot be replaced in the running job (its replacement rejoins
// and restores node 0's copies of its stages' snapshots, or without them every stage goes
// back to the newest checkpoint); empty when it can.
std::string no_rejoin_reason(const JobPlan& plan, const NodeSetup& setup, bool snapshots, bool copies) {
  if (setup.nnodes <= 1) return "it runs in one process";
  if (plan.recovery.policy != FaultPolicy::restart) return "fault.policy is abort";
  if (!snapshots) return "fault.snapshot_every is 0: no snapshots to restore";
  if (!copies && !plan.all_cpu())
    return "node 0 keeps no copy of GPU stages' snapshots (fault.buddy_copies), and a "
           "replacement process does not join the NCCL edges yet";
  if (!copies && plan.checkpoint_every <= 0)
    return "node 0 keeps no copy of the other nodes' snapshots (fault.buddy_copies is off) "
           "and no checkpoint is written to go back to (checkpoint.every is 0)";
  if (setup.rejoin_timeout.count() <= 0) return "fault.rejoin_timeout_s is 0";
  return "";
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
  shape.no_rejoin = no_rejoin_reason(plan, setup, shape.snapshots, shape.copies);
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
