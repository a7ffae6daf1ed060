#pragma once
// plan.json: the resolved placement (for each stage its device, replica and layers) and
// the schedule, written before the first step so a user (or a script) can see what runs
// where before anything is computed.
#include <nlohmann/json.hpp>

#include "actors/runtime/training_job.hpp"

namespace conveyor {

/// {"schedule", "stages", "micro_batches", "virtual_stages",
///  "partition" (uniform | explicit | auto), "blocks_per_stage" (per model stage),
///  "partition_reason" (what was chosen and why),
///  "placement": [{"stage", "replica", "device", "layers", "chunks": [...]}]}
nlohmann::json plan_json(const TrainingJob& job);

}  // namespace conveyor
