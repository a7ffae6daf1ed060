#pragma once
// What makes a checkpoint this run's: the config keys that change the numbers a step
// computes — the model, the data, the seed, the optimizer and its schedule, the global
// batch. A resume may change everything else: the layout (stages, schedule, partition,
// replicas: resharding gives the same bits), train.steps (to go further), the devices,
// evaluation, checkpoints, tracing, fault handling. A checkpoint whose identity differs
// is another run's (two runs that shared a checkpoint.dir): --resume refuses it unless
// --force says the change is meant (a new learning rate after a loss spike, say).
#include <string>
#include <string_view>
#include <vector>

#include "apps/config/run_config.hpp"

namespace conveyor {

/// True for a key of the run's identity (see above).
bool is_identity_key(std::string_view key);

/// "optim.lr 0.001 (checkpoint) vs 0.0003 (this run)" for each identity key whose
/// values differ, in the keys' order; empty when `then` and `now` are one run.
std::vector<std::string> identity_differences(const RunConfig& then, const RunConfig& now);

}  // namespace conveyor
