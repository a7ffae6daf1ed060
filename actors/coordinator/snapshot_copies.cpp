// Without buddy copies (StageRestarts::remote_markers: fault.buddy_copies off) node 0's
// store holds only markers of the other nodes' snapshots. Two things need the states
// themselves, in node 0's store, of one step boundary S: a checkpoint that node 0 writes
// (coordinator_actor.cpp's capture) and a grow (coordinator_grow.cpp), which cuts them for
// the grown layout. Both ask each stage of another node whose copy of S node 0 lacks for
// one (CopySnapshot): the stage sends its own snapshot of S to node 0's keeper as a buddy
// copy would come (snapshot_keeper.hpp), and the caller polls the store until every copy
// arrived. What must hold: only stages of other nodes are asked, and only for a step they
// snapshot (S is a boundary where a snapshot was due, and every stage reported it: the
// marker is in the store), so a stage that cannot answer has failed; that failure is
// recovered from as any (its down message), or ends the run when nothing recovers.
#include <fmt/format.h>

#include "actors/coordinator/coordinator_flow.hpp"
#include "actors/coordinator/stage_gather.hpp"
#include "actors/messages/recovery_messages.hpp"

namespace conveyor::coordinator_flow {

std::vector<int> ask_for_copies(Self* self, std::int64_t steps_done, const std::string& purpose) {
  auto& st = self->state;
  std::vector<int> asked;
  for (std::size_t r = 0; r < st.stages.size(); ++r) {
    const int rank = static_cast<int>(r);
    const auto held = st.job->services.snapshots->get(rank, steps_done);
    if (!is_remote(st, rank) || (held && !held->marker)) continue;
    asked.push_back(rank);
    if_current<SnapshotTaken>(
        self, self->request(st.stages[r], caf::infinite, CopySnapshot{steps_done}),
        [](const SnapshotTaken&) {},
        [=](caf::error& e) {
          if (self->state.budget) return;  // the stage's failure is recovered from
          fail(self, fmt::format("{}: stage {}: copying its snapshot of step {} to node 0: {}", purpose, rank,
                                 steps_done, stage_text(self, e, rank)));
        });
  }
  return asked;
}

}  // namespace conveyor::coordinator_flow
