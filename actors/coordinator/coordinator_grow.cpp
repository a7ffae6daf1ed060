// Issue 44's grow: after a shrink, a node that joins (the lost one restarted with its node
// rank, or a new process given that rank and the job's --rdzv) is taken in, and the job
// goes back to the configured layout, or the largest the nodes present can hold:
//   node 0's directory connects every node's channels to the joined process, then tells
//   the coordinator (on_node_joined) → the next boundary fault.grow allows (at_step: any
//   step boundary; at_checkpoint: one where a checkpoint was taken; never: the directory
//   refused the node) where a snapshot is due → node 0's store holds every stage's
//   snapshot S of that boundary (its own, and the buddy copies, polled; without buddy
//   copies node 0 first asks the other nodes' stages for copies of S, as a checkpoint's
//   capture does: snapshot_copies.cpp) → the layout of the nodes present (those running a
//   stage and those a shrink kept idle: replan_nodes.hpp) and joined (choose_layout, the
//   same on every node) → S's states cut
//   for it (reshard_snapshots) → the move onto it (coordinator_relayout.cpp; the joined
//   node's first actors end with the old layout's) → the "joined" row, its log line and
//   plan.json's next generation → the run goes on from S, nothing replayed.
// What must hold: S is the boundary the run stands at, so no step is redone or skipped;
// the steps after it run on the new layout and compute what the old one would (the same
// global batch and micro-batches; the sampler a pure function of seed, step and
// micro-batch; the state cut bit for bit), so the run ends with the weights of the run
// without the faults. A grow that cannot be done at this boundary leaves the job as it
// was (the joined node waits for the next one, or is told why it is not taken).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <utility>

#include "actors/coordinator/coordinator_flow.hpp"
#include "actors/messages/error_text.hpp"
#include "actors/fault/reshard_snapshots.hpp"
#include "actors/messages/recovery_messages.hpp"
#include "actors/plan/elastic_plan.hpp"
#include "actors/plan/grow_boundary.hpp"
#include "actors/plan/replan_nodes.hpp"

namespace conveyor::coordinator_flow {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kSnapshotPoll = std::chrono::milliseconds(1);

const char* grow_name(GrowPolicy p) {
  switch (p) {
    case GrowPolicy::at_step: return "at_step";
    case GrowPolicy::at_checkpoint: return "at_checkpoint";
    case GrowPolicy::never: return "never";
  }
  return "?";
}

// Whether node 0's store holds every stage actor's own snapshot of `steps_done` (not a
// marker: a copy of another node's has arrived).
bool holds_every_stage(const CoordinatorState& st, std::int64_t steps_done) {
  const auto& store = *st.job->services.snapshots;
  for (int a = 0; a < st.job->plan.stage_actors(); ++a) {
    const auto held = store.get(a, steps_done);
    if (!held || held->marker) return false;
  }
  return true;
}

// The nodes that run a stage actor now, those kept idle and those that joined, ascending.
std::vector<int> nodes_with_joined(const CoordinatorState& st) {
  std::set<int> joined;
  for (const auto& [node, j] : st.joined) joined.insert(node);
  return replan_nodes(st.restarts.node_of_rank, st.idle_nodes, joined, {});
}

// Joined nodes that the job cannot take: their first actors end with `why`, which their
// process exits with.
void refuse_joined(Self* self, const std::string& why) {
  fmt::print(stderr, "conveyor train: {}\n", why);
  end_joined(self, failure(why));
}

// The copies the grow asked for S (grow_copies) are all in node 0's store: their log
// line, with the time they took (none when node 0 held them all already: a checkpoint's
// capture at this boundary asked for them).
void copies_arrived(CoordinatorState& st, std::int64_t steps_done) {
  const auto asked = std::exchange(st.grow_copies, std::nullopt);
  if (!asked || asked->steps_done != steps_done || asked->ranks.empty()) return;
  std::set<int> nodes;
  for (int r : asked->ranks) nodes.insert(st.restarts.node_of_rank.at(static_cast<std::size_t>(r)));
  fmt::print(stderr,
             "conveyor train: grow after step {}: node 0 asked node(s) [{}] for copies of stage(s) [{}]'s snapshots "
             "of that step (fault.buddy_copies off); they arrived in {:.1f} ms\n",
             steps_done, fmt::join(nodes, ", "), fmt::join(asked->ranks, ", "),
             std::chrono::duration<double, std::milli>(Clock::now() - asked->at).count());
}

}  // namespace

void end_joined(Self* self, const caf::error& reason) {
  auto& st = self->state;
  for (auto& [node, j] : st.joined)
    for (auto& a : j.stages.actors) self->send_exit(a, reason);
  st.joined.clear();
}

void on_node_joined(Self* self, NodeStages& stages) {
  auto& st = self->state;
  const int node = stages.node;
  const bool in_layout = std::find(st.restarts.node_of_rank.begin(), st.restarts.node_of_rank.end(), node) !=
                         st.restarts.node_of_rank.end();
  std::string refused;
  if (st.in(CoordinatorPhase::finishing))
    refused = "the run is finishing";
  else if (in_layout)
    refused = "it runs stages of the current layout already";
  else if (st.job->plan.recovery.grow == GrowPolicy::never)
    refused = "fault.grow is never";
  if (!refused.empty()) {
    const auto why = fmt::format("node {} joined, but is not taken in: {}", node, refused);
    fmt::print(stderr, "conveyor train: {}\n", why);
    for (auto& a : stages.actors) self->send_exit(a, failure(why));
    return;
  }
  const auto policy = st.job->plan.recovery.grow;
  fmt::print(stderr,
             "conveyor train: node {} joined the shrunk job: it is taken in at the next {} boundary "
             "(fault.grow {})\n",
             node, policy == GrowPolicy::at_checkpoint ? "checkpoint" : "step", grow_name(policy));
  st.joined[node] = CoordinatorState::JoinedNode{std::move(stages), Clock::now()};
}

bool grow_due(const CoordinatorState& st, bool checkpointed) {
  if (st.joined.empty() || !st.in(CoordinatorPhase::running)) return false;
  if (!st.job->services.snapshots || !st.restarts.keeper) return false;
  const auto& plan = st.job->plan;
  return grow_at(plan.recovery.grow,
                 GrowBoundary{st.step + 1, plan.steps, plan.recovery.snapshot_every, checkpointed});
}

void grow_at_boundary(Self* self, std::int64_t steps_done, int polls) {
  auto& st = self->state;
  if (polls == 0 && st.restarts.remote_markers) {
    // Without buddy copies node 0 holds markers of the other nodes' snapshots of S: their
    // stages copy them to it now, before anything of the grow is decided.
    st.grow_copies = CoordinatorState::AskedCopies{
        steps_done, ask_for_copies(self, steps_done, fmt::format("growing after step {}", steps_done)), Clock::now()};
  }
  if (!holds_every_stage(st, steps_done)) {
    if (polls * kSnapshotPoll < st.restarts.copy_wait) {
      self->delayed_send(self, kSnapshotPoll, grow_retry_atom::value, steps_done, polls + 1, st.generation);
      return;
    }
    fmt::print(stderr,
               "conveyor train: the joined node(s) are not taken in after step {}: node 0 did not receive "
               "every stage's snapshot of it within {} s; the next boundary tries again\n",
               steps_done, std::chrono::duration<double>(st.restarts.copy_wait).count());
    st.grow_copies.reset();
    resume_at_boundary(self, steps_done);
    return;
  }
  copies_arrived(st, steps_done);
  // Without buddy copies the other nodes' states of S came because node 0 asked for them
  // (the grow, or the checkpoint's capture at this boundary).
  const auto origin = st.restarts.remote_markers ? RestoreOrigin::asked_copies : RestoreOrigin::snapshot;
  auto grow = std::make_shared<Relaying>();
  grow->began = Clock::now();
  grow->steps_done = steps_done;
  grow->nodes = nodes_with_joined(st);
  grow->choice = choose_layout(st.started->plan, st.started_nodes, grow->nodes);
  if (!grow->choice.plan) {
    refuse_joined(self, fmt::format("the joined node(s) are not taken in: {}", grow->choice.replan.reason));
    resume_at_boundary(self, steps_done);
    return;
  }
  const JobPlan& to = *grow->choice.plan;
  // Replicas: the new actors join the next generation of their stage groups once restored
  // (coordinator_relayout.cpp), groups of the grown layout's size (ReplicaGroups::join); a
  // count below the configured one computes the configured replicas' shares as a shrink's.
  if (to.stage_actors() <= st.job->plan.stage_actors()) {
    refuse_joined(self, fmt::format("the joined node(s) are not taken in: the nodes present hold {} already "
                                    "(the configured layout, or the largest the devices allow)",
                                    describe_shape(st.job->plan.replicas,
                                                   static_cast<int>(st.job->plan.placement.ranks.size()))));
    resume_at_boundary(self, steps_done);
    return;
  }
  try {
    grow->cut = reshard_snapshots(*st.job->services.snapshots, steps_done, st.job->plan, to);
  } catch (const std::exception& e) {
    refuse_joined(self, fmt::format("the joined node(s) are not taken in: cutting the snapshots of step {} for "
                                    "the new layout: {}",
                                    steps_done, e.what()));
    resume_at_boundary(self, steps_done);
    return;
  }
  // The first node to join names the event; its time starts the clock of "ms".
  auto first = st.joined.begin();
  for (auto it = st.joined.begin(); it != st.joined.end(); ++it)
    if (it->second.at < first->second.at) first = it;
  auto event = std::make_shared<ReplanEvent>(ReplanEvent{ReplanEvent::Cause::joined, first->first,
                                                          summarize(st.job->plan, st.restarts.node_of_rank),
                                                          summarize(to, grow->choice.node_of_rank),
                                                          origin, 0, 0.0, {}, {}});
  // Every node this move seats shares its one row (replan_event.hpp): one layout change.
  for (const auto& [node, j] : st.joined) event->joined_nodes.push_back(node);  // map: ascending
  const auto joined_at = first->second.at;
  for (auto& [node, j] : st.joined)
    grow->also_end.insert(grow->also_end.end(), j.stages.actors.begin(), j.stages.actors.end());
  st.joined.clear();
  for (const auto& w : grow->choice.replan.warnings) fmt::print(stderr, "conveyor train: replan: {}\n", w);
  // Replies of the old layout are void from here; a failure meanwhile is not recovered
  // from (the old actors are going): the recovering phase makes it end the run.
  ++st.generation;
  st.enter(CoordinatorPhase::recovering);
  st.reports.clear();
  st.recovery = std::make_shared<PendingRecovery>(PendingRecovery{
      Failure{"grow", {}, {}, fmt::format("node {} joined", event->node)}, steps_done, steps_done, joined_at,
      steps_done, restore_origin_name(origin)});
  grow->done = [self, event, joined_at, steps_done, r = grow.get()] {
    auto& st = self->state;
    event->ms = std::chrono::duration<double, std::milli>(Clock::now() - joined_at).count();
    event->phases_ms = relayout_phases(*r, joined_at);
    st.probe.relaid_out(true, event->node, steps_done, event->ms);
    st.observer->on_replan(*event, st.job->plan, st.restarts.node_of_rank, st.layout_generation);
    st.recovery.reset();
    st.enter(CoordinatorPhase::running);
    if (st.restarts.recovered) st.restarts.recovered();
    resume_at_boundary(self, steps_done);
  };
  grow->failed = [self, nodes = grow->nodes](const std::string& why) {
    fail(self, fmt::format("growing onto nodes [{}] failed: {}", fmt::join(nodes, ", "), why));
  };
  relayout_job(self, std::move(grow));
}

}  // namespace conveyor::coordinator_flow
