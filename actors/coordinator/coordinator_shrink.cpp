// Issue 44's shrink: a lost node whose replacement did not join within
// fault.rejoin_timeout_s is given up on, and the nodes present take the job on a smaller
// layout (coordinator_flow.hpp):
//   deadline → the layout of the nodes present (those running a stage and those an earlier
//   shrink kept idle, but the lost: replan_nodes.hpp; choose_layout: the same on every
//   node) →
//   the state it starts from, step S cut for it:
//     with buddy copies, S = the newest step every stage holds in node 0's store (its own
//     stages' snapshots and the other nodes' buddy copies, the lost node's among them),
//     cut in memory (reshard_snapshots);
//     without them (fault.buddy_copies off: node 0 holds only markers of the other nodes'
//     snapshots), S = the newest verified checkpoint of this run, its shards read from
//     node 0's disk and cut the same way (reshard_checkpoint) by a worker of their own
//     (checkpoint_cut_aside.hpp: the coordinator answers meanwhile; the shrink is under
//     way, st.moving, from the deadline on); every stage, the survivors' too, goes back
//     to it, and the steps after it are redone;
//   → the move onto it (coordinator_relayout.cpp: every node present spawns its actors of
//   the new layout and resets its snapshot store, the old actors end, every new actor
//   restores the cut states through node 0's keeper) → the replan row ("buddy copies" or
//   "checkpoint", the steps redone), plan.json, the recovery row → replay from S.
// What must hold: the steps from S are replayed on the new layout and compute what the
// old layout would have (same global batch and micro-batches, a sampler that is a pure
// function of seed, step and micro-batch; the state bit for bit), so the run ends with the
// weights of the run without the fault. Nothing is changed before every check passed: a
// shrink that cannot be done (no checkpoint yet, without buddy copies) leaves the failure
// as it was, with the reason added.
// Replicas (parallel.data R > 1): the R' < R replicas of the layout chosen compute the R
// configured replicas' shares of every step (JobPlan::configured_replicas, some taking one
// more: configured_shares) and combine them as the R-replica group did
// (actors/worker/gradient_shares.hpp; in Gloo's ring order: gloo_ring_order.hpp): one
// replica alone, several after gathering every share over their stage group, rebuilt with
// R' ranks at the generation the new actors join once restored (ReplicaGroups::join's
// size, coordinator_relayout.cpp), so the weights stay the R-replica run's bit for bit.
// Periodic checkpoints (checkpoint.every) go on in the layout that runs: node 0
// writes them from its store as before, their manifest saying the shrunk stages and
// partition (CheckpointHook::on_relayout, at the move), and --resume reshards them onto
// whatever layout it starts (actors/checkpoint/reshard.hpp). One that was being written
// when the node was lost was handed over whole from node 0's store (the capture needs
// every stage's snapshot of its step), so it completes in the old layout (the shrink
// without buddy copies waits for it: it may be the newest); one whose capture was still
// waiting for the lost node's copy was never handed over, and the replay takes it again.
// With checkpoint.writers every_node each node writes its own stages' shards
// (coordinator_shard_writes.cpp): after the move the nodes of the shrunk layout write
// their new stages' shards (WriteShard goes to the actors the coordinator holds now, each
// answering from its own snapshots, which the move reset and the cut state began again)
// and node 0's manifest names the shrunk layout (on_relayout, as for node 0 writers). A
// checkpoint whose shard the lost node was still to write fails as the loss is seen
// (RemoteShards::fail_node, coordinator_rejoin.cpp: "went down with node k", no manifest,
// the run still exits 0); the replay from S takes it again when S is before its step,
// else the next checkpoint is the first of the shrunk layout. Its other nodes' shards
// need no old actor: the write was queued with the snapshot it writes. A report that
// comes after its attempt ended is refused by the attempt's token (remote_shards.hpp).
// Without buddy copies, from_checkpoint reads such a checkpoint's shards on node 0 as any:
// every_node requires one folder every node sees.
// Tied embeddings (model.tie_embeddings): the new layout's two holders join a group of their
// own after the restore (coordinator_relayout.cpp); not with replicas yet.
// Supported for now: CPU stages, no tied embeddings with replicas, no sharded optimizer
// state; else the reason says which.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <utility>

#include "actors/coordinator/checkpoint_cut_aside.hpp"
#include "actors/coordinator/coordinator_flow.hpp"
#include "actors/coordinator/stage_gather.hpp"
#include "actors/checkpoint/filesystem.hpp"
#include "actors/fault/reshard_snapshots.hpp"
#include "actors/plan/elastic_plan.hpp"
#include "actors/plan/replan_nodes.hpp"

namespace conveyor::coordinator_flow {
namespace {

using Clock = std::chrono::steady_clock;

// Why this job cannot shrink at all; empty when it can.
std::string unsupported(const CoordinatorState& st) {
  const JobPlan& plan = st.job->plan;
  if (plan.recovery.shrink == ShrinkPolicy::never) return "fault.shrink is never";
  if (st.started_nodes.empty()) return "the job runs in one process";
  if (!st.job->services.snapshots || !st.restarts.keeper) return "the job keeps no in-memory snapshots";
  if (!plan.all_cpu()) return "shrinking GPU stages is not supported yet";
  // The new layout's tied holders join a group of their own (coordinator_relayout.cpp); with
  // replicas the share-wise combine has not been checked against the tied sum's order.
  if (plan.model.tie_embeddings && std::max(plan.replicas, plan.configured_replicas) > 1)
    return "shrinking replicas whose tied embeddings sum in a group (model.tie_embeddings) is not supported yet";
  if (plan.shards_optimizer_state())
    return "shrinking replicas that shard their optimizer state (optim.shard_state) is not supported yet";
  if (!st.recovery) return "no recovery is under way";
  return {};
}

// Where the shrunk layout starts: step S, its states cut by actor of the new plan.
struct ShrinkStart {
  std::int64_t steps_done = 0;
  std::vector<StageStateSnapshot> cut;
  RestoreOrigin origin = RestoreOrigin::buddy_copies;
  std::string described;  // the recovery row's restored_from
  std::string checkpoint;  // from a checkpoint: its folder, whose shards `cut` is yet to hold
};

// With buddy copies: node 0's store holds every stage's state of S. Empty: done.
std::string from_buddy_copies(const CoordinatorState& st, const JobPlan& to, ShrinkStart& start) {
  const auto step = st.job->services.snapshots->consistent_step();
  if (!step) return "node 0 holds no snapshot of one step of every stage";
  try {
    start.cut = reshard_snapshots(*st.job->services.snapshots, *step, st.job->plan, to);
  } catch (const std::exception& e) {
    return fmt::format("cutting the snapshots of step {} for the new layout: {}", *step, e.what());
  }
  start.steps_done = *step;
  start.origin = RestoreOrigin::buddy_copies;
  start.described = "buddy copies";
  return {};
}

// Without buddy copies the lost node's state after its last checkpoint is gone with it:
// every stage goes back to the newest verified checkpoint of this run (a write under way
// finishes first: it may be that one). Its shards are read and cut later, aside
// (read_checkpoint_aside). Empty: found.
std::string from_checkpoint(const CoordinatorState& st, ShrinkStart& start) {
  const auto failed_step = st.recovery->failed_step;
  const auto point = st.checkpoints ? st.checkpoints->newest_checkpoint(failed_step, CheckpointLayouts::any_of_the_run)
                                    : CheckpointRestorePoint{"", 0, "this run writes no checkpoints"};
  if (!point.error.empty())
    return fmt::format("node 0 keeps no copy of the other nodes' snapshots (fault.buddy_copies off), so the "
                       "nodes present could only go back to a checkpoint of this run, and there is none to go "
                       "back to: {}",
                       point.error);
  start.steps_done = point.step;
  start.checkpoint = point.path;
  start.origin = RestoreOrigin::checkpoint;
  start.described = "checkpoint " + point.path;
  fmt::print(stderr, "conveyor train: replan: node 0 keeps no copy of the lost node's snapshots "
             "(fault.buddy_copies off): every stage goes back to checkpoint {} (step {}), {} step(s) redone\n",
             point.path, start.steps_done, failed_step - start.steps_done);
  return {};
}

// The checkpoint's shards read and cut for the new layout by a worker of their own
// (checkpoint_cut_aside.hpp), so that the coordinator's thread stays free meanwhile; then
// the move. The shrink is under way (st.moving): a node of it lost meanwhile abandons it,
// and the cut, come late, is void.
void read_checkpoint_aside(Self* self, const std::shared_ptr<Relaying>& shrink, const std::string& path) {
  const auto generation = self->state.generation;
  const auto current = [self, shrink, generation] {
    return is_current(self->state, generation) && self->state.moving == shrink;
  };
  cut_checkpoint_aside(
      self, checkpoint::posix_filesystem(), path, std::make_shared<const JobPlan>(*shrink->choice.plan),
      [self, shrink, current, path](CheckpointCut& cut) {
        if (!current()) return;
        if (cut.steps_done != shrink->steps_done) {
          self->state.moving.reset();
          shrink->failed(fmt::format("checkpoint {} holds step {}, not {}", path, cut.steps_done, shrink->steps_done));
          return;
        }
        shrink->cut = std::move(cut.states);
        relayout_job(self, shrink);
      },
      [self, shrink, current, path](const std::string& why) {
        if (!current()) return;
        self->state.moving.reset();
        shrink->failed(fmt::format("cutting checkpoint {} (step {}) for the new layout: {}", path, shrink->steps_done,
                                   why));
      });
}

// The nodes that run a stage actor now and those kept idle, but those awaited (lost for
// good now).
std::vector<int> present_nodes(const CoordinatorState& st) {
  std::set<int> lost;
  for (const auto& [node, awaited] : st.awaiting) lost.insert(node);
  return replan_nodes(st.restarts.node_of_rank, st.idle_nodes, {}, lost);
}

}  // namespace

std::string shrink_onto_present_nodes(Self* self, int lost_node) {
  auto& st = self->state;
  if (auto why = unsupported(st); !why.empty()) return why;
  auto shrink = std::make_shared<Relaying>();
  shrink->began = Clock::now();
  shrink->nodes = present_nodes(st);
  shrink->choice = choose_layout(st.started->plan, st.started_nodes, shrink->nodes);
  if (!shrink->choice.plan) return shrink->choice.replan.reason;
  ShrinkStart start;
  const auto why = st.restarts.remote_markers ? from_checkpoint(st, start)
                                              : from_buddy_copies(st, *shrink->choice.plan, start);
  if (!why.empty()) return why;
  const auto step = start.steps_done;
  shrink->steps_done = step;
  shrink->cut = std::move(start.cut);
  // From here on the job moves: what the old layout awaited or respawned is void.
  ++st.generation;
  shrink->given_up = std::exchange(st.awaiting, {});  // awaited again if the move is abandoned
  st.rejoined.clear();
  st.respawning = 0;
  auto& pending = *st.recovery;
  pending.restored = step;
  pending.restored_from = start.described;
  pending.failure.respawn.clear();
  for (int a = 0; a < shrink->choice.plan->stage_actors(); ++a) pending.failure.respawn.push_back(a);
  auto event = std::make_shared<ReplanEvent>(ReplanEvent{ReplanEvent::Cause::lost,
                                                          lost_node,
                                                          summarize(st.job->plan, st.restarts.node_of_rank),
                                                          summarize(*shrink->choice.plan, shrink->choice.node_of_rank),
                                                          start.origin,
                                                          pending.failed_step - step,
                                                          0.0, {}, {}});
  for (const auto& w : shrink->choice.replan.warnings) fmt::print(stderr, "conveyor train: replan: {}\n", w);
  shrink->done = [self, event, r = shrink.get()] {
    auto& st = self->state;
    event->ms = std::chrono::duration<double, std::milli>(Clock::now() - st.recovery->detected).count();
    event->phases_ms = relayout_phases(*r, st.recovery->detected);
    st.probe.relaid_out(false, event->node, st.recovery->restored, event->ms);
    st.observer->on_replan(*event, st.job->plan, st.restarts.node_of_rank, st.layout_generation);
    finish_recovery(self);
  };
  shrink->failed = [self, nodes = shrink->nodes](const std::string& why) {
    fail(self, fmt::format("{}; shrinking onto nodes [{}] failed: {}", self->state.recovery->failure.reason,
                           fmt::join(nodes, ", "), why));
  };
  if (start.checkpoint.empty()) {
    relayout_job(self, std::move(shrink));
    return {};
  }
  st.moving = shrink;  // under way from here: a node of it lost while the read runs abandons it
  read_checkpoint_aside(self, shrink, start.checkpoint);
  return {};
}

}  // namespace conveyor::coordinator_flow
