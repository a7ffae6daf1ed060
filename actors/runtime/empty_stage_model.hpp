#pragma once
// A stage model that computes nothing: forward and backward hand back a preallocated
// tensor of the right shape at once. It exists to measure the runtime's own cost per
// action (message in, action dispatched, message out) — `conveyor bench overhead` — and
// is never used for training.
#include "kernels/model/stage_model.hpp"

namespace conveyor {

/// REQUIRES: config describes activations of (micro_batch_size, seq_len, d_model).
StageModelFactory empty_stage_model_factory(std::int64_t micro_batch_size);

}  // namespace conveyor
