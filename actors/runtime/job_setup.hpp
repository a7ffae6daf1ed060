#pragma once
// What the composition root (run_job.hpp) decides once, from the plan and this process's
// place in the job, before any actor exists: how stages recover (snapshots, node 0's
// buddy copies, whether a lost process can be replaced) and the services the plan needs
// that the app did not hand in. One process is the one-node case of the same rules.
#include <memory>
#include <string>

#include "actors/cluster/node_setup.hpp"
#include "actors/job/job_services.hpp"

namespace conveyor {

struct RecoveryShape {
  bool snapshots = false;  // every stage keeps in-memory snapshots (plan.keeps_snapshots)
  // Node 0 keeps a copy of every other node's snapshots as they are taken (a job over
  // several processes with fault.buddy_copies on, or auto and every stage on the CPU).
  bool copies = false;
  // Why a lost node k > 0 cannot be replaced in the running job; empty when it can.
  std::string no_rejoin;
  bool rejoin() const { return no_rejoin.empty(); }
  // checkpoint.writers every_node across processes: node k > 0 writes its own stages'
  // shards, node 0 keeps the book of them (needs the snapshots the shards come from).
  bool nodes_write_shards = false;
  // Snapshots each store keeps: node 0 one more than the minimum with copies (the copies
  // of other nodes' snapshots arrive a little after its own stages'), the others a margin
  // beyond that; the minimum without (a GPU stage's snapshot is its whole state).
  int snapshot_keep(int node) const { return !copies ? 2 : node == 0 ? 3 : 4; }
};

/// `across_processes`: the job reaches other processes (a rendezvous store, CAF's
/// middleman). Throws std::invalid_argument for fault.buddy_copies on with GPU stages.
RecoveryShape recovery_shape(const JobPlan& plan, const NodeSetup& setup, bool across_processes);

/// The job this process runs: `plan` with fault.buddy_copies resolved as `shape` says, and
/// `given` (the app's trace, checkpoint hook and fault injection) completed with what the
/// plan needs: snapshots, replica groups (over the job's store when across processes),
/// the hang watchdog's progress board, node k's shard-write queue.
std::shared_ptr<const Job> make_job(const JobPlan& plan, JobServices given, const NodeSetup& setup,
                                    const RecoveryShape& shape, bool across_processes);

}  // namespace conveyor
