#include "actors/plan/eval_plan.hpp"

#include <algorithm>

namespace conveyor {

int eval_wave_size(int train_micro_batches, int model_stages, int eval_batches) {
  return std::max(1, std::min(std::max(train_micro_batches, 16 * model_stages), eval_batches));
}

std::vector<sched::Action> eval_actions(const RankPlacement& rank, int first, int count) {
  std::vector<const ChunkPlacement*> chunks;
  for (const auto& c : rank.chunks) chunks.push_back(&c);
  std::sort(chunks.begin(), chunks.end(),
            [](auto* a, auto* b) { return a->model_stage < b->model_stage; });
  std::vector<sched::Action> actions;
  for (const auto* c : chunks)
    for (int mb = first; mb < first + count; ++mb) {
      sched::Action a;
      a.stage = rank.rank;
      a.kind = sched::ActionKind::F;
      a.micro_batch = mb;
      a.chunk = c->chunk;
      actions.push_back(a);
    }
  return actions;
}

std::vector<sched::Action> eval_wave_of(const std::vector<sched::Action>& whole, int wave,
                                        int micro_batch) {
  const int first = micro_batch / wave * wave;
  std::vector<sched::Action> out;
  for (const auto& a : whole)
    if (a.micro_batch >= first && a.micro_batch < first + wave) out.push_back(a);
  return out;
}

}  // namespace conveyor
