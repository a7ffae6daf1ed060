#pragma once
// pipeline.partition's mode as the plan reads it: the config loader parses it
// (apps/config/config_enums.hpp holds its names), the job builder and the re-planner
// (replan.hpp) cut the model by it.

namespace conveyor {

/// pipeline.partition: even split, the partitioner's choice, or the list the config gives
/// ("explicit" is never written as a value: the list is).
enum class PartitionMode { uniform, automatic, explicit_list };

}  // namespace conveyor
