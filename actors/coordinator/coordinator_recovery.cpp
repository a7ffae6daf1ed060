// Recovery of a run from a failed, hung or non-finite step (coordinator_flow.hpp):
//   detection → (budget check) → replace dead or hung stage actors (or wait for a lost
//   node's replacement, coordinator_rejoin.cpp) → every stage aborts the round and loads
//   snapshot S (the newest all hold) → replay from S.
// With replicas (parallel.data > 1, one process) and a failure outside the optimizer step
// (actors/fault/restore_source.hpp): every stage aborts the round and leaves its replica
// group (AbortRound), each respawned stage copies a healthy replica's state
// (snapshot_atom → RestoreFromReplica), the others keep theirs; S is the step under way.
// Either way every stage then joins the next generation of its replica group
// (JoinReplicaGroup), and the replay starts.
// What must hold: after a recovery every stage holds exactly the state after S steps, no
// message or reply of an aborted round is acted on (round fences in the stages, the
// generation here), and a replayed step computes what it would have without the fault
// (the data of a step depends only on the seed and the step).
#include <chrono>
#include <memory>

#include <fmt/format.h>

#include "actors/checkpoint/sharded_state.hpp"
#include "actors/coordinator/coordinator_flow.hpp"
#include "actors/coordinator/stage_end_text.hpp"
#include "actors/coordinator/stage_gather.hpp"
#include "actors/messages/error_text.hpp"
#include "actors/messages/recovery_messages.hpp"
#include "actors/fault/restore_source.hpp"
#include "actors/job/replica_groups.hpp"

namespace conveyor::coordinator_flow {
namespace {

using Clock = std::chrono::steady_clock;

bool recoverable(const CoordinatorState& st, const Failure& f) {
  if (!st.job->plan.recovers_in_place() || !st.budget) return false;
  if (f.fault != "nan" && st.job->plan.recovery.policy != FaultPolicy::restart) return false;
  for (int r : f.respawn) {
    // A stage of a lost process comes back with its node's replacement; one that failed
    // while its process lives on is respawned there.
    if (is_remote(st, r) && f.fault == "node") {
      if (!waits_for_replacements(st)) return false;
    } else if (!respawns_in_place(st, r)) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<std::pair<std::vector<checkpoint::StageShard>, std::int64_t>> snapshot_shards(
    const CoordinatorState& st, std::int64_t steps_done) {
  auto held = st.job->services.snapshots->shards(steps_done);
  if (!held) return held;
  if (st.job->plan.shards_optimizer_state()) {  // every replica holds a part of the moments
    held->first = checkpoint::merge_sharded_replicas(std::move(held->first), st.job->plan.replicas);
    return held;
  }
  held->first.resize(st.job->plan.placement.ranks.size());  // rank order: replica 0 first
  return held;
}

bool is_remote(const CoordinatorState& st, int rank) {
  const auto& nodes = st.restarts.node_of_rank;
  return !nodes.empty() && nodes.at(static_cast<std::size_t>(rank)) != 0;
}

PeerTable peer_table(const CoordinatorState& st) {
  return PeerTable{st.stages, st.restarts.keeper, 0, st.restarts.standby_keeper, st.restarts.standby_node};
}

bool waits_for_replacements(const CoordinatorState& st) {
  return st.restarts.keeper && st.restarts.rejoin_timeout.count() > 0;
}

bool respawns_in_place(const CoordinatorState& st, int rank) {
  return is_remote(st, rank) ? static_cast<bool>(st.restarts.directory)
                             : static_cast<bool>(st.restarts.respawn);
}

void note_remote_snapshot(CoordinatorState& st, int rank, std::int64_t steps_done) {
  const auto every = st.job->plan.recovery.snapshot_every;
  if (!st.restarts.remote_markers || !st.job->services.snapshots || every <= 0 || steps_done % every != 0 ||
      !is_remote(st, rank))
    return;
  st.job->services.snapshots->put_marker(rank, steps_done);
}

void replace_stage(Self* self, int rank, const std::string* lost_why) {
  auto& st = self->state;
  auto& old = st.stages.at(static_cast<std::size_t>(rank));
  self->demonitor(old.address());
  self->send_exit(old, caf::exit_reason::kill);  // a hung one; a dead one ignores it
  if (!is_remote(st, rank)) {
    old = st.restarts.respawn(rank, st.round);
    self->monitor(old);
    return;
  }
  if (!lost_why) {
    ++st.respawning;
    if_current<StageActor>(
        self, self->request(st.restarts.directory, caf::infinite, RespawnStage{rank, st.round}),
        [=](StageActor& fresh) {
          auto& st = self->state;
          st.stages.at(static_cast<std::size_t>(rank)) = fresh;
          self->monitor(fresh);
          --st.respawning;
          restore_when_replaced(self);
        },
        [=](caf::error& e) {
          fail(self, fmt::format("{}; recovering from it failed: respawning stage {}: {}",
                                 self->state.recovery->failure.reason, rank,
                                 stage_text(self, e, rank)));
        });
    return;
  }
  const int node = st.restarts.node_of_rank.at(static_cast<std::size_t>(rank));
  auto [it, first] = st.awaiting.try_emplace(node);
  it->second.ranks.push_back(rank);
  if (first) {
    it->second.why = *lost_why;
    self->delayed_send(self, st.restarts.rejoin_timeout, rejoin_deadline_atom::value, node,
                       st.generation);
    st.observer->on_node_lost(node, it->second.why,
                              std::chrono::duration<double>(st.restarts.rejoin_timeout).count());
    if (st.restarts.waiting_for_replacement) st.restarts.waiting_for_replacement();
  }
}

namespace {

std::optional<RestoreSource> choose_source(const CoordinatorState& st,
                                           const std::vector<int>& respawn,
                                           std::optional<std::int64_t> boundary) {
  std::optional<std::int64_t> snapshot;
  if (st.job->services.snapshots) snapshot = st.job->services.snapshots->consistent_step();
  // Over several processes a replica's in-memory state does not travel (its source may be
  // in another process): the snapshot path only, as if inside the optimizer step.
  if (!st.restarts.node_of_rank.empty()) boundary = std::nullopt;
  return choose_restore_source(st.job->plan.replica_layout(), respawn, boundary, snapshot,
                               st.job->plan.shards_optimizer_state());
}

// Why no state is left to restore (replicas; one replica returns false instead).
std::string no_source(const CoordinatorState& st, const Failure& f,
                      std::optional<std::int64_t> boundary) {
  return fmt::format(
      "{}; recovering from it failed: {}, and no in-memory snapshot to go back to "
      "(fault.snapshot_every is {})",
      f.reason,
      boundary ? "every replica of a failed stage was lost"
               : "it happened inside the optimizer step (some stages may have stepped), so "
                 "no healthy replica holds the step's starting state",
      st.job->plan.recovery.snapshot_every);
}

}  // namespace

void give_up(Self* self, const Failure& f) {
  auto& st = self->state;
  std::string why = fmt::format(
      "{}; {} recoveries within fault.window_s ({} s) already, the most fault.max_restarts "
      "allows: giving up",
      f.reason, st.budget->max_restarts(), st.budget->window_s());
  const auto step = st.job->services.snapshots ? st.job->services.snapshots->consistent_step() : std::nullopt;
  if (st.checkpoints && step) {
    if (auto held = snapshot_shards(st, *step)) {
      try {
        st.checkpoints->take(*step, std::move(held->first), held->second, /*stop=*/true);
        why += fmt::format("; a checkpoint after step {} was written (resume with --resume latest)",
                           *step);
      } catch (const std::exception& e) {
        why += fmt::format("; writing the checkpoint after step {} failed too: {}", *step, e.what());
      }
    } else if (st.restarts.remote_markers) {
      // The other nodes' stages hold step `step` in their own processes, which cannot be
      // asked now (one of them may be the failure).
      why += fmt::format("; no checkpoint of step {}: node 0 keeps no copy of the other "
                         "nodes' snapshots (fault.buddy_copies off), the newest checkpoint "
                         "written stays the one to resume from",
                         *step);
    }
  }
  fail(self, why);
}

bool try_recover(Self* self, Failure f) {
  auto& st = self->state;
  if (!recoverable(st, f)) return false;
  const auto detected = Clock::now();
  const auto source = choose_source(st, f.respawn, st.boundary);
  if (!source) {
    if (st.job->plan.replicas <= 1) return false;
    fail(self, no_source(st, f, st.boundary));
    return true;
  }
  if (!st.budget->admit(detected)) {
    give_up(self, f);
    return true;
  }
  ++st.generation;
  st.enter(CoordinatorPhase::recovering);
  st.reports.clear();
  // Every group is rebuilt after a recovery: end its survivors' waits now (a GPU
  // rank would otherwise wait in a bucket its failed peer never starts until
  // transport.timeout_s, before this recovery could reach it).
  if (st.job->services.replica_groups) st.job->services.replica_groups->cancel_below(st.group_generation + 1);
  st.recovery = std::make_shared<PendingRecovery>(
      PendingRecovery{f, st.step, source->steps_done, detected, st.boundary});
  st.respawning = 0;
  const std::string* lost = f.fault == "node" ? &st.recovery->failure.reason : nullptr;
  for (int r : f.respawn) replace_stage(self, r, lost);
  restore_when_replaced(self);
  return true;
}

namespace {

void send_restores(Self* self);

}  // namespace

void restore_when_replaced(Self* self) {
  auto& st = self->state;
  if (!st.awaiting.empty() || st.respawning > 0) return;
  if (!st.restarts.rebuild_channels) {
    send_restores(self);
    return;
  }
  // NCCL edges first: kernels stuck on the failed stage's edges end, and the replay's
  // messages meet new communicators (NCCL matches by order, so the old ones cannot serve).
  if_current<bool>(
      self,
      self->request(st.restarts.directory, caf::infinite,
                    RebuildChannels{++st.channel_generation, /*forward=*/true}),
      [=](bool) { send_restores(self); },
      [=](caf::error& e) {
        fail(self, fmt::format("{}; recovering from it failed: rebuilding the NCCL edges: {}",
                               self->state.recovery->failure.reason,
                               error_text(self->system(), e)));
      });
}

namespace {

// A restore of this recovery's that failed: a stage of another process that cannot answer
// means its process is gone (a node recovery again); anything else fails the run.
void on_restore_failed(Self* self, int rank, const caf::error& e) {
  auto& st = self->state;
  if (died_meanwhile(st, rank, e)) return;
  if (is_remote(st, rank) && (e == caf::sec::request_receiver_down ||
                              e == caf::exit_reason::remote_link_unreachable)) {
    const int node = st.restarts.node_of_rank.at(static_cast<std::size_t>(rank));
    on_node_lost(self, node, fmt::format("stage {} failed: node {} became unreachable "
                                         "while restoring", rank, node));
    return;
  }
  fail(self, fmt::format("{}; recovering from it failed: restoring stage {} to step {}: {}",
                         st.recovery->failure.reason, rank, st.recovery->restored,
                         stage_text(self, e, rank)));
}

// Without buddy copies node 0 holds nothing of a rejoined node's stages: every stage goes
// back to the newest checkpoint, whose shards node 0's keeper reads and hands out.
void restore_checkpoint(Self* self) {
  auto& st = self->state;
  auto& pending = *st.recovery;
  const auto point = st.checkpoints ? st.checkpoints->newest_checkpoint(pending.failed_step, CheckpointLayouts::current)
                                    : CheckpointRestorePoint{"", 0, "this run writes no checkpoints"};
  if (!point.error.empty()) {
    fail(self, fmt::format("{}; recovering from it failed: node 0 keeps no copy of the other "
                           "nodes' snapshots (fault.buddy_copies off), so the job goes back to "
                           "its newest checkpoint, and there is none: {}",
                           pending.failure.reason, point.error));
    return;
  }
  pending.restored = point.step;
  pending.restored_from = "checkpoint " + point.path;
  // Newer snapshots belong to the steps replayed; gone first, so that the restored step
  // each stage keeps is not the oldest beyond what the store holds.
  st.job->services.snapshots->discard_after(point.step);
  // Once every stage is restored, the stage groups are rebuilt (with replicas) and the
  // replay starts.
  gather<StageRestored>(
      self, first_ranks(st.stages.size()),
      [=](int rank) {
        auto& st = self->state;
        const auto r = static_cast<std::size_t>(rank);
        const auto stage = static_cast<int>(r % st.job->plan.placement.ranks.size());
        return self->request(st.restarts.keeper, caf::infinite,
                             RestoreFromCheckpoint{rank, st.stages[r],
                                                   RestoreStage{point.step, st.round}, point.path,
                                                   stage});
      },
      {.all = [=](std::map<int, StageRestored>&) { rejoin_replica_groups(self); },
       .failed = [=](int rank, caf::error& e) { on_restore_failed(self, rank, e); },
       .each =
           [=](int rank, StageRestored&) {
             auto& st = self->state;
             if (is_remote(st, rank))
               st.job->services.snapshots->put_marker(rank, point.step);  // kept in its own process
           }});
}

// Every stage loads its snapshot of the step restored (a stage of a rejoined node: node 0's
// copy of it); then, with replicas, every stage group is rebuilt.
void restore_snapshots(Self* self) {
  auto& st = self->state;
  const RestoreStage restore{st.recovery->restored, st.round};
  gather<StageRestored>(
      self, first_ranks(st.stages.size()),
      [=](int rank) {
        auto& st = self->state;
        const auto r = static_cast<std::size_t>(rank);
        // A stage of a rejoined node starts empty: node 0's keeper hands it its copy.
        return st.rejoined.count(rank) ? self->request(st.restarts.keeper, caf::infinite,
                                                       RestoreRejoined{rank, st.stages[r], restore})
                                       : self->request(st.stages[r], caf::infinite, restore);
      },
      {.all = [=](std::map<int, StageRestored>&) { rejoin_replica_groups(self); },
       .failed = [=](int rank, caf::error& e) { on_restore_failed(self, rank, e); }});
}

void send_restores(Self* self) {
  auto& st = self->state;
  const PeerTable table = peer_table(st);
  for (auto& s : st.stages) self->send(s, table);
  auto& pending = *st.recovery;
  if (st.job->plan.replicas > 1) {
    // Chosen again: stages that failed since the detection joined this recovery and may
    // leave a pipeline stage without a healthy replica.
    const auto source = choose_source(st, pending.failure.respawn, pending.boundary);
    if (!source) {
      fail(self, no_source(st, pending.failure, pending.boundary));
      return;
    }
    pending.restored = source->steps_done;
    pending.restored_from = source->describe(st.job->plan.replica_layout());
    if (source->kind == RestoreSource::Kind::replicas) {
      restore_from_replicas(self, source->sources);
      return;
    }
  }
  if (st.restarts.remote_markers && !st.rejoined.empty()) {
    restore_checkpoint(self);
    return;
  }
  restore_snapshots(self);
}

}  // namespace

void finish_recovery(Self* self) {
  auto& st = self->state;
  const auto pending = std::move(st.recovery);
  const Failure& f = pending->failure;
  st.enter(CoordinatorPhase::running);
  st.rejoined.clear();
  if (st.job->services.snapshots)
    st.job->services.snapshots->discard_after(pending->restored);  // the replay puts them again
  const auto now = Clock::now();
  RecoveryEvent e;
  e.fault = f.fault;
  e.stages = f.stages;
  e.step = pending->failed_step;
  e.restored_step = pending->restored;
  e.respawned = f.respawn;
  e.restored_from = pending->restored_from;
  e.recovery_ms = std::chrono::duration<double, std::milli>(now - pending->detected).count();
  e.restarts_in_window = st.budget->used(now);
  e.reason = f.reason;
  st.observer->on_recovery(e);
  if (st.restarts.recovered) st.restarts.recovered();
  resume_at_boundary(self, pending->restored);
}

bool died_meanwhile(const CoordinatorState& st, int rank, const caf::error& e) {
  // request_receiver_down: the actor ended, its process answering for it (a process that
  // is gone fails no request; its link's loss comes as the down message's reason).
  return st.job->plan.replicas > 1 && respawns_in_place(st, rank) && e == caf::sec::request_receiver_down;
}

void take_first_snapshot(Self* self, std::function<void()> then) {
  auto& st = self->state;
  if (!st.job->services.snapshots) {
    then();
    return;
  }
  const TakeSnapshot take{st.step};
  gather<SnapshotTaken>(
      self, first_ranks(st.stages.size()),
      asking_stages(self, take),
      {.all = [next = std::move(then)](std::map<int, SnapshotTaken>&) { next(); },
       .failed =
           [=](int r, caf::error& e) {
             fail(self, fmt::format("stage {}: taking its first in-memory snapshot (for "
                                    "fault.policy restart / fault.on_nan rollback): {}",
                                    r, stage_text(self, e, r)));
           },
       .each =
           [=](int, SnapshotTaken& taken) {
             auto& st = self->state;
             if (st.restarts.remote_markers && is_remote(st, taken.rank))
               st.job->services.snapshots->put_marker(taken.rank, taken.steps_done);
           }});
}

}  // namespace conveyor::coordinator_flow
