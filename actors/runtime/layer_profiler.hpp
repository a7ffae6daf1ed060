#pragma once
// Measured layer costs on this CPU, for the partitioner (actors/plan/schedule/partitioner.hpp).
//
// Builds one GptStage per kind of unit (an embedding-only slice, a block's attention half
// and its MLP half as slices of their own, a head-only slice), runs forward,
// backward_input and backward_weight on one micro-batch of random tokens a few times, and
// keeps the median of each. Every block has the same shape, so one block's halves stand
// for all L of them. Memory is measured, not modelled: the activation
// bytes are the larger of StageStash::bytes() after forward and after backward_input, and
// the parameter bytes count each parameter four times (value, gradient, AdamW m and v).
//
// Timings are single-threaded, as a stage's kernels run on its own thread; they are wall
// times, so they vary from run to run (the partition chosen from them may too). The whole
// pass runs on the calling thread.
#include <cstdint>

#include "actors/plan/schedule/partitioner.hpp"
#include "kernels/model/gpt_config.hpp"

namespace conveyor {

struct ProfileOptions {
  std::int64_t micro_batch_size = 1;  // sequences per micro-batch (of config.seq_len tokens)
  int repetitions = 3;                // timed runs per unit, after one untimed warm-up
  std::uint64_t seed = 1;             // parameters and the random batch
};

/// Costs of every unit of `config` (embedding, both halves of config.layers blocks, head) for one
/// micro-batch; source reads "measured on this CPU (median of 3 runs, micro-batch of 4 x 64
/// tokens)". Throws InputError for a config GptStage rejects or options out of range.
sched::ModelCosts profile_layers(const GptConfig& config, const ProfileOptions& options = {});

}  // namespace conveyor
