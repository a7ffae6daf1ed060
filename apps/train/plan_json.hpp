#pragma once
// plan.json: the resolved placement (for each stage its device, replica and layers) and
// the schedule, written before the first step so a user (or a script) can see what runs
// where before anything is computed.
#include <nlohmann/json.hpp>
#include <vector>

#include "actors/plan/job_plan.hpp"

namespace conveyor {

/// {"schedule", "stages", "micro_batches", "virtual_stages",
///  "partition" (uniform | explicit | auto), "blocks_per_stage" (per model stage; 6.5 when
///  a stage holds half of a block: kernels/model/stage_slice.hpp),
///  "partition_reason" (what was chosen and why),
///  "placement": [{"stage", "replica", "device", "layers", "chunks": [...]}] (replica 0),
///  "data_parallel" (parallel.data, R),
///  "replicas": [{"replica", "stages": [{"stage" (its actor, r·P + s), "pipeline_stage",
///               "device", "first_micro_batch", "micro_batches"[, "node"]}]}]}
/// "micro_batches" is one replica's share per step (the schedule's), the placement's layers
/// are the same on every replica. `node_of_actor` (a job over several processes: the node
/// of every stage actor) adds each stage's "node"; empty: one process, no "node".
nlohmann::json plan_json(const JobPlan& plan, const std::vector<int>& node_of_actor = {});

/// Half blocks per model stage as JSON blocks, integers where whole: {12, 13} -> [6, 6.5].
nlohmann::json partition_json(const std::vector<int>& halves);

}  // namespace conveyor
