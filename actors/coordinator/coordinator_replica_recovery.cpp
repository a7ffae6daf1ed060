// Recovery with data-parallel replicas (parallel.data > 1, one process; coordinator_flow.hpp):
//   AbortRound to every stage (drop the round, leave the stage group)
//   → each respawned stage copies a healthy replica of its pipeline stage (snapshot_atom
//     to every source, then RestoreFromReplica to every respawned stage); every other
//     stage keeps its state
//   → JoinReplicaGroup{next generation} to every stage → replay.
// The snapshot path (restore_snapshots in coordinator_recovery.cpp) ends in the same
// rejoin. A stage's failed group is handled here too (on_group_failed), and failures seen
// during a recovery join it (join_recovery).
//
// What must hold:
// - a source is read only after it aborted its round (its AbortRound answered: CAF keeps
//   the order of two messages to one actor, so snapshot_atom then finds no plan running),
//   and only while no stage has stepped (RestoreSource's boundary), so it holds exactly the
//   state after `restored` steps, as every stage that keeps its own;
// - every stage has left its old group (its buckets settled) before any stage joins the
//   next generation: the joins are sent only once every restore is answered, so a stage
//   blocked in a bucket of the old group is released by its peers leaving it first;
// - replies of an older generation are ignored (a failure that joins the recovery starts
//   these phases again).
#include <fmt/format.h>

#include <memory>

#include "actors/coordinator/coordinator_flow.hpp"
#include "actors/coordinator/stage_gather.hpp"
#include "actors/messages/error_text.hpp"
#include "actors/messages/replica_recovery_messages.hpp"
#include "actors/messages/stage_snapshot.hpp"

namespace conveyor::coordinator_flow {
namespace {

// The recovery under way cannot go on: the run stops with its reason and `what` failed.
void recovery_failed(Self* self, const std::string& what, const caf::error& e) {
  fail(self, fmt::format("{}; recovering from it failed: {}: {}",
                         self->state.recovery->failure.reason, what,
                         error_text(self->system(), e)));
}

// Every respawned stage (a key of `states`) loads its source's state.
void load_copies(Self* self, const std::map<int, int>& sources,
                 std::map<int, StageSnapshot>& states) {
  std::vector<int> targets;
  for (const auto& [to, from] : sources) targets.push_back(to);
  const auto restored = self->state.recovery->restored;
  gather<StageRestored>(
      self, targets,
      [&](int target) {
        return self->request(self->state.stages.at(static_cast<std::size_t>(target)),
                             caf::infinite,
                             RestoreFromReplica{restored, std::move(states.at(target))});
      },
      {.all = [=](std::map<int, StageRestored>&) { rejoin_replica_groups(self); },
       .failed =
           [=](int target, caf::error& e) {
             if (died_meanwhile(self->state, target, e)) return;
             recovery_failed(self,
                             fmt::format("stage {} loading the state of stage {} (its replica)",
                                         target, sources.at(target)),
                             e);
           }});
}

// Each respawned stage copies its source's state (every source is read first, then every
// respawned stage loads its copy); then the groups are rebuilt.
void copy_from_sources(Self* self, const std::map<int, int>& sources) {
  std::vector<int> targets;
  for (const auto& [to, from] : sources) targets.push_back(to);
  gather<StageSnapshot>(
      self, targets,
      [=](int target) {
        return self->request(self->state.stages.at(static_cast<std::size_t>(sources.at(target))),
                             caf::infinite, snapshot_atom::value);
      },
      {.all = [=](std::map<int, StageSnapshot>& states) { load_copies(self, sources, states); },
       .failed =
           [=](int target, caf::error& e) {
             const int source = sources.at(target);
             if (died_meanwhile(self->state, source, e)) return;
             recovery_failed(self, fmt::format("reading the state of stage {} for stage {}",
                                               source, target),
                             e);
           }});
}

}  // namespace

void restore_from_replicas(Self* self, const std::map<int, int>& sources) {
  auto& st = self->state;
  const AbortRound abort{st.round};
  gather<RoundAborted>(
      self, first_ranks(st.stages.size()),
      asking_stages(self, abort),
      {.all = [=](std::map<int, RoundAborted>&) { copy_from_sources(self, sources); },
       .failed =
           [=](int rank, caf::error& e) {
             if (died_meanwhile(self->state, rank, e)) return;
             recovery_failed(self, fmt::format("aborting the round on stage {}", rank), e);
           }});
}

void join_next_group_generation(Self* self, std::function<void()> joined,
                                std::function<void(int, caf::error&, std::uint32_t)> failed) {
  auto& st = self->state;
  if (!st.job->services.replica_groups) {  // no groups: no replicas, no tied embedding
    joined();
    return;
  }
  const JoinReplicaGroup join{++st.group_generation};
  gather<ReplicaGroupJoined>(
      self, first_ranks(st.stages.size()), asking_stages(self, join),
      {.all = [joined = std::move(joined)](std::map<int, ReplicaGroupJoined>&) { joined(); },
       .failed = [failed = std::move(failed), generation = join.generation](int rank, caf::error& e) {
         failed(rank, e, generation);
       }});
}

void rejoin_replica_groups(Self* self) {
  join_next_group_generation(
      self, [self] { finish_recovery(self); },
      [self](int rank, caf::error& e, std::uint32_t generation) {
        if (died_meanwhile(self->state, rank, e)) return;
        // A replica that did not join in time (it died, or hung): start the restore
        // over; a dead one is respawned through its down message.
        join_recovery(self, Failure{"collective", {rank}, {},
                                    fmt::format("stage {}: joining generation {} of its "
                                                "replica group failed: {}",
                                                rank, generation, error_text(self->system(), e))});
      });
}

bool join_recovery(Self* self, Failure f) {
  auto& st = self->state;
  Failure& current = st.recovery->failure;
  // The broken group the replicas saw first was this stage's death: one recovery.
  const bool explains =
      current.fault == "collective" && current.respawn.empty() && !f.respawn.empty();
  if (explains) {
    current.fault = f.fault;
    current.reason = f.reason;
    current.stages = f.stages;
  } else {
    if (!st.budget->admit(std::chrono::steady_clock::now())) {
      give_up(self, f);
      return true;
    }
    current.stages.insert(current.stages.end(), f.stages.begin(), f.stages.end());
    current.reason += "; during its recovery, " + f.reason;
  }
  ++st.generation;  // the replies of the restore under way are void
  for (int r : f.respawn) {
    current.respawn.push_back(r);
    replace_stage(self, r, /*lost_why=*/nullptr);
  }
  restore_when_replaced(self);
  return true;
}

void on_group_failed(Self* self, int rank, std::int64_t round, const std::string& what) {
  auto& st = self->state;
  // A recovery under way rebuilds every group; a round already over is not this run's.
  if (st.in(CoordinatorPhase::recovering) || st.in(CoordinatorPhase::finishing) || round < st.round)
    return;
  const auto why = fmt::format("stage {}: its replica group failed: {}", rank, what);
  if (!(st.in(CoordinatorPhase::running) && try_recover(self, Failure{"collective", {rank}, {}, why})))
    fail(self, why);
}

}  // namespace conveyor::coordinator_flow
