// Moving the job onto another layout at a step boundary (issue 44), the part a shrink
// (coordinator_shrink.cpp) and a grow (coordinator_grow.cpp) share:
//   Relayout through node 0's directory (every node in the layout spawns its actors of
//   it, fenced at the round) → the old actors, and those a joined node started with, end
//   in order → the coordinator holds the new job, stages and plans (the checkpoint hook
//   told the layout its next checkpoints hold: CheckpointHook::on_relayout) → node 0's store
//   takes the cut states as step S → every new actor restores them through node 0's
//   keeper (RestoreRejoined) → `done`.
// What must hold: nothing of the old layout is left running once `done` runs (its actors
// were demonitored before they were told to end, so their ends are no failure), and every
// new actor holds exactly the cut state of step S. The caller bumped the generation and
// is in the recovering phase, so no reply of the old layout is acted on meanwhile.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>

#include "actors/coordinator/coordinator_flow.hpp"
#include "actors/coordinator/stage_gather.hpp"
#include "actors/messages/error_text.hpp"
#include "actors/messages/recovery_messages.hpp"

namespace conveyor::coordinator_flow {
namespace {

void restore_new_layout(Self* self, std::shared_ptr<Relaying> r);

// The new layout's actors are up (every node's, by rank): the old ones end, the
// coordinator moves onto the new layout, node 0's store takes the cut states.
void move_onto(Self* self, std::shared_ptr<Relaying> r, std::vector<StageActor>& fresh) {
  auto& st = self->state;
  r->spawned = std::chrono::steady_clock::now();
  const JobPlan& plan = *r->choice.plan;
  if (static_cast<int>(fresh.size()) != plan.stage_actors()) {
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
  st.train_plans = train_plans_of(plan);
  st.restarts.node_of_rank = r->choice.node_of_rank;
  auto& store = *st.job->services.snapshots;
  for (int a = 0; a < plan.stage_actors(); ++a) store.put(a, r->cut.at(static_cast<std::size_t>(a)));
  r->cut.clear();
  const PeerTable table{st.stages, st.restarts.keeper};
  for (auto& s : st.stages) {
    self->monitor(s);
    self->send(s, table);
  }
  restore_new_layout(self, std::move(r));
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
             r->done();
           },
       .failed =
           [=](int rank, caf::error& e) {
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
  const Relayout relayout{static_cast<std::uint32_t>(++st.layout_generation), r->nodes, st.round, true};
  if_current<std::vector<StageActor>>(
      self, self->request(st.restarts.directory, caf::infinite, relayout),
      [=](std::vector<StageActor>& fresh) { move_onto(self, r, fresh); },
      [=](caf::error& e) {
        r->failed(fmt::format("moving onto nodes [{}] failed: {}", fmt::join(r->nodes, ", "),
                              error_text(self->system(), e)));
      });
}

}  // namespace conveyor::coordinator_flow
