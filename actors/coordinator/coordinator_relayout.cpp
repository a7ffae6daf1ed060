// Moving the job onto another layout at a step boundary (issue 44), the part a shrink
// (coordinator_shrink.cpp) and a grow (coordinator_grow.cpp) share:
//   Relayout through node 0's directory (every node in the layout spawns its actors of
//   it, fenced at the round) → the old actors, and those a joined node started with, end
//   in order → the coordinator holds the new job, stages and plans (the checkpoint hook
//   told the layout its next checkpoints hold: CheckpointHook::on_relayout) → node 0's store
//   takes the cut states as step S → every new actor restores them through node 0's
//   keeper (RestoreRejoined) → with groups (the tied embedding's), every new actor joins
//   their next generation → `done`.
// What must hold: nothing of the old layout is left running once `done` runs (its actors
// were demonitored before they were told to end, so their ends are no failure), and every
// new actor holds exactly the cut state of step S. The caller bumped the generation and
// is in the recovering phase, so no reply of the old layout is acted on meanwhile.
// A second fault: a node of the move lost while it is under way (its down messages, the
// liveness watch, node 0's directory finding it unreachable, a restore that cannot reach
// it) abandons it (abandon_move): nothing of a void move is acted on or left running, and
// node 0's store holds step S of the layout the coordinator holds (the old one's until
// the new actors take over, which is why node 0's store is reset here and not by its
// directory), so the shrink at that node's deadline moves from there.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>

#include "actors/coordinator/coordinator_flow.hpp"
#include "actors/coordinator/stage_gather.hpp"
#include "actors/messages/error_text.hpp"
#include "actors/messages/recovery_messages.hpp"
#include "actors/plan/replan_nodes.hpp"

namespace conveyor::coordinator_flow {
namespace {

void restore_new_layout(Self* self, std::shared_ptr<Relaying> r);
void join_new_layout_groups(Self* self, std::shared_ptr<Relaying> r);

// The move is over (done or failed): no longer under way.
void settle(Self* self, const std::shared_ptr<Relaying>& r) {
  auto& st = self->state;
  if (st.moving == r) st.moving.reset();
}

// Whether `e`, the error of a request to an actor of another process, says its process
// is gone (rather than that it answered with a failure).
bool unreachable(const caf::error& e) {
  return e == caf::sec::request_receiver_down || e == caf::exit_reason::remote_link_unreachable;
}

// The new layout's actors are up (every node's, by rank): the old ones end, the
// coordinator moves onto the new layout, node 0's store takes the cut states.
void move_onto(Self* self, std::shared_ptr<Relaying> r, LayoutActors& layout) {
  auto& fresh = layout.stages;
  auto& st = self->state;
  r->spawned = std::chrono::steady_clock::now();
  const JobPlan& plan = *r->choice.plan;
  if (static_cast<int>(fresh.size()) != plan.stage_actors()) {
    settle(self, r);
    r->failed(fmt::format("{} stage actors came up for a layout of {}", fresh.size(), plan.stage_actors()));
    return;
  }
  for (auto& old : st.stages) {
    self->demonitor(old.address());
    self->send_exit(old, caf::exit_reason::user_shutdown);  // in order: their nodes go on
  }
  for (auto& first : r->also_end) self->send_exit(first, caf::exit_reason::user_shutdown);
  r->also_end.clear();
  st.job = std::make_shared<const Job>(Job{plan, st.job->services});
  // The next checkpoint is this layout's shards: its manifest must say so.
  if (st.checkpoints) st.checkpoints->on_relayout(plan);
  st.stages = fresh;
  // The standby of the new layout (issue 44 item 7): node 1's, or the next lowest node's
  // once node 1 is gone; node 0's new stages send it their copies.
  st.restarts.standby_keeper = layout.standby_keeper;
  st.restarts.standby_node = layout.standby_node;
  st.train_plans = train_plans_of(plan);
  st.restarts.node_of_rank = r->choice.node_of_rank;
  st.idle_nodes = idle_nodes(r->nodes, r->choice.node_of_rank);  // the next re-plan seats them
  r->took_over = true;
  st.between_layouts = false;
  // The old layout's snapshots go only now: until here a move abandoned could go again
  // from them.
  auto& store = *st.job->services.snapshots;
  store.reset(plan.stage_actors());
  for (int a = 0; a < plan.stage_actors(); ++a) store.put(a, r->cut.at(static_cast<std::size_t>(a)));
  r->cut.clear();
  const PeerTable table = peer_table(st);
  for (auto& s : st.stages) {
    self->monitor(s);
    self->send(s, table);
  }
  restore_new_layout(self, std::move(r));
}

// The new actors' groups (the tied embedding's two holders, model.tie_embeddings): joined
// at a generation of their own once every actor restored, as after any recovery
// (rejoin_replica_groups), so that no key of the old layout's groups is read; then `done`.
// The new actors were spawned without joining (restarted_stage_actor).
void join_new_layout_groups(Self* self, std::shared_ptr<Relaying> r) {
  join_next_group_generation(
      self,
      [self, r] {
        settle(self, r);
        r->done();
      },
      [self, r](int rank, caf::error& e, std::uint32_t generation) {
        settle(self, r);
        r->failed(fmt::format("stage {} of the new layout joining generation {} of its groups: {}", rank,
                              generation, stage_text(self, e, rank)));
      });
}

// Every actor of the new layout loads step S from node 0's store (its keeper hands each
// its state: over the channel to another node's, with the message to node 0's).
void restore_new_layout(Self* self, std::shared_ptr<Relaying> r) {
  auto& st = self->state;
  const RestoreStage restore{r->steps_done, st.round};
  gather<StageRestored>(
      self, first_ranks(st.stages.size()),
      [=](int rank) {
        auto& st = self->state;
        return self->request(st.restarts.keeper, caf::infinite,
                             RestoreRejoined{rank, st.stages[static_cast<std::size_t>(rank)], restore});
      },
      {.all =
           [=](std::map<int, StageRestored>&) {
             r->restored = std::chrono::steady_clock::now();
             join_new_layout_groups(self, r);
           },
       .failed =
           [=](int rank, caf::error& e) {
             auto& st = self->state;
             if (is_remote(st, rank) && unreachable(e)) {  // its node is gone: the move is abandoned
               const int node = st.restarts.node_of_rank.at(static_cast<std::size_t>(rank));
               on_node_lost(self, node,
                            fmt::format("stage {} failed: node {} became unreachable while the new layout "
                                        "restored",
                                        rank, node));
               return;
             }
             settle(self, r);
             r->failed(fmt::format("restoring stage {} of the new layout to step {}: {}", rank, r->steps_done,
                                   stage_text(self, e, rank)));
           }});
}

}  // namespace

ReplanPhases relayout_phases(const Relaying& r, std::chrono::steady_clock::time_point waited_since) {
  const auto ms = [](auto from, auto to) { return std::chrono::duration<double, std::milli>(to - from).count(); };
  return {ms(waited_since, r.began), ms(r.began, r.sent), ms(r.sent, r.spawned), ms(r.spawned, r.restored)};
}

void relayout_job(Self* self, std::shared_ptr<Relaying> r) {
  auto& st = self->state;
  r->sent = std::chrono::steady_clock::now();
  r->generation = static_cast<std::uint32_t>(++st.layout_generation);
  st.moving = r;
  const Relayout relayout{r->generation, r->nodes, st.round, true};
  const auto generation = st.generation;
  self->request(st.restarts.directory, caf::infinite, relayout)
      .then(
          [=](LayoutActors& fresh) {
            if (!is_current(self->state, generation)) {
              // A void move's actors, all spawned before it was abandoned: they never take over.
              for (auto& a : fresh.stages) self->send_exit(a, caf::exit_reason::user_shutdown);
              return;
            }
            move_onto(self, r, fresh);
          },
          [=](caf::error& e) {
            if (!is_current(self->state, generation)) return;
            settle(self, r);
            r->failed(fmt::format("moving onto nodes [{}] failed: {}", fmt::join(r->nodes, ", "),
                                  error_text(self->system(), e)));
          });
}

void abandon_move(Self* self, int lost_node, const std::string& why) {
  auto& st = self->state;
  const auto r = std::move(st.moving);
  if (!r) return;
  ++st.generation;  // its answers, its late actors and its restores are void from here
  // Generation 0: not sent yet (a shrink's checkpoint still being read: coordinator_shrink.cpp).
  if (r->generation != 0) caf::anon_send(st.restarts.directory, relayout_void_atom::value, r->generation);
  fmt::print(stderr,
             "conveyor train: replan: the move onto nodes [{}] ({}) is abandoned: {}; the job "
             "{}\n",
             fmt::join(r->nodes, ", "),
             r->generation != 0 ? fmt::format("layout generation {}", r->generation)
                                : std::string("its checkpoint still being read"),
             why,
             r->took_over ? "holds that layout, its state of step " + std::to_string(r->steps_done) +
                                " in node 0's store, and waits for node " + std::to_string(lost_node)
                          : "stays on the layout before it until it moves again: at node " + std::to_string(lost_node) +
                                "'s rejoin deadline (a replacement meanwhile is refused), or at once when node " +
                                std::to_string(lost_node) + " held no stage of it");
  if (r->took_over) return;
  st.between_layouts = true;
  // Their deadline passed: the next one (the lost node's own) gives up on them again.
  for (auto& [node, awaited] : r->given_up) st.awaiting.try_emplace(node, awaited);
  // A grow's joined nodes are not taken in (their actors of the move are void too).
  const auto refused = fmt::format("the job did not take this node in: node {} was lost while the job grew onto "
                                   "nodes [{}] ({}); start it again to join the job",
                                   lost_node, fmt::join(r->nodes, ", "), why);
  for (auto& a : r->also_end) self->send_exit(a, failure(refused));
}

}  // namespace conveyor::coordinator_flow
