#pragma once
// The evaluation's plans. An evaluation of train.eval_batches micro-batches runs in
// waves (a round each, the losses gathered across them), so that at most a wave's
// activations are ever in flight: forward-only plans have no backward to hold the first
// stage back, and one plan of every micro-batch let it run ahead and buffer them all
// (memory that grew with eval_batches). Between waves no plan runs, so a stop (a
// preemption notice) is honoured there, within one wave.
// Micro-batch indices are the evaluation's own (0 … eval_batches − 1) in every wave, so
// the data and the loss do not depend on the wave size. Pure logic: no CAF.
#include <vector>

#include "actors/plan/placement.hpp"
#include "actors/plan/schedule/action.hpp"

namespace conveyor {

/// Micro-batches per wave: the train step's count, or 16 per model stage when that is
/// more (the pipeline's fill and drain then idle a stage at most (S − 1) / (17S − 1) of
/// the wave), at most eval_batches. A wave holds only stage inputs in flight (one tensor
/// of micro-batch × seq × d_model each: 16 per model stage is far below the activations a
/// train step keeps for its backward, ~30 such tensors per block and micro-batch).
int eval_wave_size(int train_micro_batches, int model_stages, int eval_batches);

/// A forward-only plan for micro-batches [first, first + count): on each rank, its chunks
/// in model-stage order, micro-batches ascending. Deadlock-free: every dependency points
/// to a lower model stage.
std::vector<sched::Action> eval_actions(const RankPlacement& rank, int first, int count);

/// The part of a whole evaluation's plan (eval_actions(rank, 0, eval_batches)) that the
/// wave holding `micro_batch` runs, for waves of `wave` micro-batches: its actions in
/// plan order. What a trace or a hang diagnosis compares a wave's round with.
std::vector<sched::Action> eval_wave_of(const std::vector<sched::Action>& whole, int wave,
                                        int micro_batch);

}  // namespace conveyor
