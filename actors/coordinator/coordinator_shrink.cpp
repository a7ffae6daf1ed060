// Issue 44's shrink: a lost node whose replacement did not join within
// fault.rejoin_timeout_s is given up on, and the nodes present take the job on a smaller
// layout (coordinator_flow.hpp):
//   deadline → S: the newest step every stage holds in node 0's store (its own stages'
//   snapshots and the other nodes' buddy copies, the lost node's among them) → the layout
//   of the nodes present (choose_layout: the same on every node) → S's states cut for it
//   (reshard_snapshots) → every node present spawns its actors of the new layout and
//   resets its snapshot store (Relayout through the node directories) → the old actors
//   end in order → node 0's store takes the cut states as step S → every new actor
//   restores them through node 0's keeper (RestoreRejoined, as a rejoined node's) → the
//   replan row, plan.json, the recovery row → replay from S.
// What must hold: the steps from S are replayed on the new layout and compute what the
// old layout would have (same global batch and micro-batches, a sampler that is a pure
// function of seed, step and micro-batch; the state bit for bit), so the run ends with the
// weights of the run without the fault. Nothing is changed before every check passed: a
// shrink that cannot be done leaves the failure as it was, with the reason added.
// Supported for now: CPU stages with buddy copies (node 0 holds every stage's state), one
// replica, no tied embeddings' group, no periodic checkpoints; else the reason says which.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <set>

#include "actors/coordinator/coordinator_flow.hpp"
#include "actors/coordinator/stage_end_text.hpp"
#include "actors/coordinator/stage_gather.hpp"
#include "actors/fault/reshard_snapshots.hpp"
#include "actors/messages/error_text.hpp"
#include "actors/messages/recovery_messages.hpp"
#include "actors/plan/elastic_plan.hpp"

namespace conveyor::coordinator_flow {
namespace {

using Clock = std::chrono::steady_clock;

// Why this job cannot shrink at all; empty when it can.
std::string unsupported(const CoordinatorState& st) {
  const JobPlan& plan = st.job->plan;
  if (plan.recovery.shrink == ShrinkPolicy::never) return "fault.shrink is never";
  if (st.started_nodes.empty()) return "the job runs in one process";
  if (!st.job->services.snapshots || !st.restarts.keeper) return "the job keeps no in-memory snapshots";
  if (st.restarts.remote_markers)
    return "node 0 keeps no copy of the other nodes' snapshots (fault.buddy_copies off): shrinking "
           "from a checkpoint is not supported yet";
  if (!plan.all_cpu()) return "shrinking GPU stages is not supported yet";
  if (plan.replicas > 1 || st.job->services.replica_groups)
    return "shrinking a job with stage groups (parallel.data > 1, model.tie_embeddings) is not "
           "supported yet";
  if (st.restarts.remote_shards) return "shrinking with checkpoint.writers every_node is not supported yet";
  // A checkpoint of the shrunk layout would hold fewer shards than the config's stages:
  // not verified yet against --resume's checks.
  if (plan.checkpoint_every > 0) return "shrinking a job that writes checkpoints (checkpoint.every) is not supported yet";
  if (!st.recovery) return "no recovery is under way";
  return {};
}

// The nodes that run a stage actor now, but those awaited (lost for good now).
std::vector<int> present_nodes(const CoordinatorState& st) {
  std::set<int> nodes(st.restarts.node_of_rank.begin(), st.restarts.node_of_rank.end());
  for (const auto& [node, awaited] : st.awaiting) nodes.erase(node);
  return {nodes.begin(), nodes.end()};
}

struct Shrink {
  int lost_node = 0;
  std::int64_t restored = 0;
  ElasticChoice choice;
  std::vector<StageStateSnapshot> cut;  // by actor of the new layout
  ReplanEvent event;
};

void restore_new_layout(Self* self, std::shared_ptr<Shrink> shrink);

// The new layout's actors are up (every node's, by rank): the old ones end, the
// coordinator moves onto the new layout, node 0's store takes the cut states.
void move_onto(Self* self, std::shared_ptr<Shrink> shrink, std::vector<StageActor>& fresh) {
  auto& st = self->state;
  const JobPlan& plan = *shrink->choice.plan;
  if (static_cast<int>(fresh.size()) != plan.stage_actors()) {
    fail(self, fmt::format("{}; shrinking failed: {} stage actors came up for a layout of {}",
                           st.recovery->failure.reason, fresh.size(), plan.stage_actors()));
    return;
  }
  for (auto& old : st.stages) {
    self->demonitor(old.address());
    self->send_exit(old, caf::exit_reason::user_shutdown);  // in order: their nodes go on
  }
  st.job = std::make_shared<const Job>(Job{plan, st.job->services});
  st.stages = fresh;
  st.train_plans = train_plans_of(plan);
  st.restarts.node_of_rank = shrink->choice.node_of_rank;
  auto& store = *st.job->services.snapshots;
  for (int a = 0; a < plan.stage_actors(); ++a) store.put(a, shrink->cut.at(static_cast<std::size_t>(a)));
  shrink->cut.clear();
  const PeerTable table{st.stages, st.restarts.keeper};
  for (auto& s : st.stages) {
    self->monitor(s);
    self->send(s, table);
  }
  restore_new_layout(self, std::move(shrink));
}

// Every actor of the new layout loads step S from node 0's store (its keeper hands each
// its state: over the channel to another node's, with the message to node 0's).
void restore_new_layout(Self* self, std::shared_ptr<Shrink> shrink) {
  auto& st = self->state;
  const RestoreStage restore{shrink->restored, st.round};
  gather<StageRestored>(
      self, first_ranks(st.stages.size()),
      [=](int rank) {
        auto& st = self->state;
        return self->request(st.restarts.keeper, caf::infinite,
                             RestoreRejoined{rank, st.stages[static_cast<std::size_t>(rank)], restore});
      },
      {.all =
           [=](std::map<int, StageRestored>&) {
             auto& st = self->state;
             shrink->event.ms =
                 std::chrono::duration<double, std::milli>(Clock::now() - st.recovery->detected).count();
             st.observer->on_replan(shrink->event, st.job->plan, st.restarts.node_of_rank, st.layout_generation);
             finish_recovery(self);
           },
       .failed =
           [=](int rank, caf::error& e) {
             fail(self, fmt::format("{}; shrinking failed: restoring stage {} of the new layout to step {}: {}",
                                    self->state.recovery->failure.reason, rank, shrink->restored,
                                    stage_text(self, e, rank)));
           }});
}

}  // namespace

std::string shrink_onto_present_nodes(Self* self, int lost_node) {
  auto& st = self->state;
  if (auto why = unsupported(st); !why.empty()) return why;
  auto shrink = std::make_shared<Shrink>();
  shrink->lost_node = lost_node;
  const auto step = st.job->services.snapshots->consistent_step();
  if (!step) return "node 0 holds no snapshot of one step of every stage";
  shrink->restored = *step;
  const auto present = present_nodes(st);
  shrink->choice = choose_layout(st.started->plan, st.started_nodes, present);
  if (!shrink->choice.plan) return shrink->choice.replan.reason;
  try {
    shrink->cut = reshard_snapshots(*st.job->services.snapshots, *step, st.job->plan, *shrink->choice.plan);
  } catch (const std::exception& e) {
    return fmt::format("cutting the snapshots of step {} for the new layout: {}", *step, e.what());
  }
  // From here on the job moves: what the old layout awaited or respawned is void.
  ++st.generation;
  st.awaiting.clear();
  st.rejoined.clear();
  st.respawning = 0;
  auto& pending = *st.recovery;
  pending.restored = *step;
  pending.restored_from = "buddy copies";
  pending.failure.respawn.clear();
  for (int a = 0; a < shrink->choice.plan->stage_actors(); ++a) pending.failure.respawn.push_back(a);
  shrink->event = ReplanEvent{ReplanEvent::Cause::lost,
                              lost_node,
                              summarize(st.job->plan, st.restarts.node_of_rank),
                              summarize(*shrink->choice.plan, shrink->choice.node_of_rank),
                              RestoreOrigin::buddy_copies,
                              pending.failed_step - *step,
                              0.0};
  for (const auto& w : shrink->choice.replan.warnings) fmt::print(stderr, "conveyor train: replan: {}\n", w);
  const Relayout relayout{static_cast<std::uint32_t>(++st.layout_generation), present, st.round, true};
  if_current<std::vector<StageActor>>(
      self, self->request(st.restarts.directory, caf::infinite, relayout),
      [=](std::vector<StageActor>& fresh) { move_onto(self, shrink, fresh); },
      [=](caf::error& e) {
        fail(self, fmt::format("{}; shrinking onto nodes [{}] failed: {}", self->state.recovery->failure.reason,
                               fmt::format("{}", fmt::join(present, ", ")), error_text(self->system(), e)));
      });
  return {};
}

}  // namespace conveyor::coordinator_flow
