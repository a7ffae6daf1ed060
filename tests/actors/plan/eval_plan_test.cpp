// The evaluation's plans: waves of a train step's micro-batches, each chunk's forwards
// in model-stage order, and the part of the whole evaluation a wave runs.
#include "actors/plan/eval_plan.hpp"

#include <doctest/doctest.h>

using namespace conveyor;

namespace {

// Rank 1 holds model stages 5 (chunk 0) and 1 (chunk 1), as a V-shaped schedule does.
RankPlacement two_chunk_rank() {
  RankPlacement rank;
  rank.rank = 1;
  rank.chunks = {ChunkPlacement{5, 1, 0, {}}, ChunkPlacement{1, 1, 1, {}}};
  return rank;
}

}  // namespace

TEST_CASE("an eval wave holds a train step's micro-batches or 16 per model stage, never more than the evaluation") {
  CHECK(eval_wave_size(64, 2, 65536) == 64);
  CHECK(eval_wave_size(8, 4, 65536) == 64);
  CHECK(eval_wave_size(8, 4, 3) == 3);
  CHECK(eval_wave_size(0, 1, 1) == 1);
}

TEST_CASE("an eval plan runs each chunk's forwards in model-stage order over its wave's micro-batches") {
  const auto actions = eval_actions(two_chunk_rank(), 6, 2);
  REQUIRE(actions.size() == 4);
  CHECK(actions[0] == (sched::Action{1, sched::ActionKind::F, 6, 1}));  // model stage 1 first
  CHECK(actions[1] == (sched::Action{1, sched::ActionKind::F, 7, 1}));
  CHECK(actions[2] == (sched::Action{1, sched::ActionKind::F, 6, 0}));
  CHECK(actions[3] == (sched::Action{1, sched::ActionKind::F, 7, 0}));
}

TEST_CASE("every wave's plan is the part of the whole evaluation that holds its micro-batches") {
  const auto rank = two_chunk_rank();
  const int batches = 11, wave = 4;
  const auto whole = eval_actions(rank, 0, batches);
  std::size_t covered = 0;
  for (int first = 0; first < batches; first += wave) {
    CAPTURE(first);
    const auto part = eval_actions(rank, first, std::min(wave, batches - first));
    covered += part.size();
    for (int mb = first; mb < std::min(first + wave, batches); ++mb)
      CHECK(eval_wave_of(whole, wave, mb) == part);
  }
  CHECK(covered == whole.size());  // the waves together run the whole evaluation once
}
