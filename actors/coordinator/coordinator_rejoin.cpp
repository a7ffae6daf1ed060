// A lost process and its replacement (coordinator_flow.hpp; the coordinator runs on node
// 0, which hosts the store, so every lost node here is some node k > 0):
//   loss (its stages' CAF connection, or its silence at the store) → a "node" recovery:
//   the node's ranks wait for a replacement (fault.rejoin_timeout_s), stages of this
//   process that fail meanwhile (their transfers to the lost node break) are respawned
//   into the same recovery → the replacement's stages take the ranks → every stage
//   restores snapshot S (the replacement's from node 0's copies) → replay; or, when none
//   joined in time, a shrink onto the nodes present (coordinator_shrink.cpp).
// What must hold: the survivors never exit; one loss is one recovery however many
// signals announce it (liveness, connection, failed transfers, a restore that cannot
// reach it, the replacement itself), in whatever order they come.
// A node of a move onto another layout (a shrink's or a grow's, coordinator_relayout.cpp)
// lost while it is under way abandons the move, and its loss is then waited for as any:
// its deadline shrinks the job again, from node 0's store. Before the move's actors took
// over, the nodes' own records may be the void move's (a node k > 0 resets its store as
// it spawns), so nothing of the old layout is restored in place: a replacement that comes
// meanwhile is refused (it can join after the shrink), and a lost node that held no stage
// (a grow's joined node) has the job move again at once.
#include <fmt/format.h>

#include <algorithm>

#include "actors/coordinator/coordinator_flow.hpp"
#include "actors/coordinator/stage_gather.hpp"
#include "actors/messages/error_text.hpp"

namespace conveyor::coordinator_flow {

namespace {

// Whether the move under way names `node` among those it moves onto.
bool moves_onto(const Relaying& r, int node) {
  return std::find(r.nodes.begin(), r.nodes.end(), node) != r.nodes.end();
}

}  // namespace

void on_node_lost(Self* self, int node, const std::string& why) {
  auto& st = self->state;
  if (st.awaiting.count(node)) return;  // known already
  if (st.moving && st.moving->given_up.count(node)) return;  // the move leaves it out already
  if (st.moving && moves_onto(*st.moving, node)) abandon_move(self, node, why);
  // The shards its stages were writing fail now, not at the end of node 0's wait.
  if (st.restarts.remote_shards) st.restarts.remote_shards->fail_node(node, st.restarts.node_of_rank, why);
  std::vector<int> ranks;
  for (std::size_t r = 0; r < st.restarts.node_of_rank.size(); ++r)
    if (st.restarts.node_of_rank[r] == node) ranks.push_back(static_cast<int>(r));
  // A node a shrink gave up on runs nothing now: news of it (the liveness watch's again)
  // changes nothing, but one that joined since and is lost before it was taken in is no
  // longer grown onto (coordinator_grow.cpp).
  if (ranks.empty() && st.layout_generation > 0) {
    // A node kept idle: the next re-plan no longer counts it (replan_nodes.hpp), and node
    // 0's directory forgets it (no move, no joiner dials it).
    if (st.idle_nodes.erase(node) > 0) {
      fmt::print(stderr, "conveyor train: node {}, in the job without a stage, was lost: no re-plan seats it now: {}\n",
                 node, why);
      if (st.restarts.directory) caf::anon_send(st.restarts.directory, forget_node_atom::value, node);
    }
    if (st.joined.erase(node) > 0)
      fmt::print(stderr, "conveyor train: node {} joined, but was lost before it was taken in: {}\n", node, why);
    // A grow's joined node lost during the move: nothing to wait for, but the nodes'
    // records are the void move's, so the job moves again, onto the nodes it ran on.
    if (st.between_layouts && !st.moving && st.awaiting.empty() && st.in(CoordinatorPhase::recovering)) {
      st.recovery->failure = Failure{"node", {}, {}, why};
      if (auto cannot = shrink_onto_present_nodes(self, node); !cannot.empty())
        fail(self, fmt::format("{}; moving the job again onto the nodes it ran on failed: {}", why, cannot));
    }
    return;
  }
  if (ranks.empty() || st.in(CoordinatorPhase::starting) || st.in(CoordinatorPhase::finishing)) {
    fail(self, why);
    return;
  }
  // Also when the loss comes during a recovery (a stage here failed first, its transfers
  // to the lost node broken): nothing would take the lost node's ranks.
  if (!waits_for_replacements(st)) {
    fail(self, st.restarts.no_rejoin.empty()
                   ? why
                   : fmt::format("{}; the job takes no replacement for a lost node ({})", why,
                                 st.restarts.no_rejoin));
    return;
  }
  if (st.in(CoordinatorPhase::recovering)) {
    // This node's ranks join the recovery under way. Restores already sent are void (a
    // stage of this node cannot answer): every stage restores again once it is back.
    if (st.awaiting.empty() && st.respawning == 0) ++st.generation;
    // The lost process is the cause: what failed here first (a stage whose transfers to
    // it broke) stays among the respawned ranks.
    auto& f = st.recovery->failure;
    if (f.fault != "node") {
      f.fault = "node";
      f.stages.clear();
      f.reason = why;
    }
    for (int r : ranks) {
      f.stages.push_back(r);
      f.respawn.push_back(r);
      replace_stage(self, r, &why);
    }
    return;
  }
  if (try_recover(self, Failure{"node", ranks, ranks, why})) return;
  fail(self, why);
}

void on_node_rejoined(Self* self, NodeStages& stages) {
  auto& st = self->state;
  if (st.between_layouts) {
    // Its stages would be restored beside ones whose node reset its store for the void
    // move: the shrink at the deadline goes on without it, and it can join after that.
    const auto why = fmt::format("node {}'s replacement is not taken in: a move onto another layout was "
                                 "abandoned (a node lost during it), and the job shrinks at the rejoin deadline; "
                                 "start it again once the job has shrunk, and it joins",
                                 stages.node);
    fmt::print(stderr, "conveyor train: {}\n", why);
    for (auto& a : stages.actors) self->send_exit(a, failure(why));
    return;
  }
  if (!st.awaiting.count(stages.node)) {
    // The replacement came before the loss was seen: the same as the loss, now.
    on_node_lost(self, stages.node,
                 fmt::format("node {} was replaced by a new process", stages.node));
    if (!st.awaiting.count(stages.node)) return;  // the run ended
  }
  for (std::size_t i = 0; i < stages.ranks.size(); ++i) {
    const int r = stages.ranks[i];
    st.stages.at(static_cast<std::size_t>(r)) = stages.actors[i];
    self->monitor(stages.actors[i]);
    st.rejoined.insert(r);
  }
  // The standby's replacement stands by again: node 0's stages send their copies to its
  // keeper from the restore on (send_restores tells them).
  if (stages.keeper) {
    st.restarts.standby_keeper = stages.keeper;
    st.restarts.standby_node = stages.node;
  }
  st.awaiting.erase(stages.node);
  restore_when_replaced(self);
}

void on_rejoin_deadline(Self* self, int node, std::uint64_t generation) {
  auto& st = self->state;
  auto it = st.awaiting.find(node);
  if (it == st.awaiting.end() || !is_current(st, generation)) return;
  const std::string why = it->second.why;
  const std::string cannot = shrink_onto_present_nodes(self, node);
  if (cannot.empty()) return;  // the nodes present take the job
  fail(self, fmt::format("{}; no replacement of node {} joined within fault.rejoin_timeout_s "
                         "({} s), and the job cannot go on without it: {}",
                         why, node, std::chrono::duration<double>(st.restarts.rejoin_timeout).count(),
                         cannot));
}

}  // namespace conveyor::coordinator_flow
