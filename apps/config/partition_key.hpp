#pragma once
// The key pipeline.partition, whose value is a name or a list:
//   pipeline.partition: uniform        blocks split as evenly as possible (the default)
//   pipeline.partition: auto           the partitioner's choice (shortest simulated step)
//   pipeline.partition: [3, 3.5, 1.5]  blocks per model stage (stages × chunks entries; .5:
//                                      a stage holds one half of a block)
// A value of either type needs its own reader, so the key is built here and listed in
// config_keys.cpp like any other. Its checks against other keys (the list's length and
// sum) run with the other cross-key checks (config_validation.cpp).
#include <optional>

#include "apps/config/config_keys.hpp"
#include "apps/config/config_validation.hpp"

namespace conveyor {

/// The ConfigKey of pipeline.partition: reads "uniform", "auto" or a list of integers
/// >= 1 (sets PartitionMode::explicit_list); writes the name or the list back.
ConfigKey partition_config_key();

/// For an explicit list: one entry per model stage (pipeline.stages × chunks per stage)
/// and a sum of model.layers; nullopt when the list fits or the mode is not explicit.
std::optional<ConfigProblem> check_partition_key(const RunConfig& config);

}  // namespace conveyor
