#pragma once
// How a run's blocks are split over its model stages (pipeline.partition), in half blocks
// (kernels/model/stage_slice.hpp), shared by
// `conveyor train` (job_builder.cpp) and `conveyor sched CONFIG`:
//   uniform   as even as possible, the earlier stages taking the remainder;
//   explicit  the list the config gives;
//   auto      the partitioner's choice (actors/plan/schedule/partitioner.hpp) from layer costs
//             measured on this CPU when devices.kind is cpu, or from the FLOP/byte cost
//             model (actors/plan/schedule/cost_model.hpp) for other devices, which need not be
//             present: planning never touches a GPU.
#include <optional>
#include <string>
#include <vector>

#include "actors/plan/schedule/partitioner.hpp"
#include "actors/plan/schedule/schedule.hpp"
#include "apps/config/run_config.hpp"
#include "apps/config/schedule_spec.hpp"

namespace conveyor {

struct PartitionChoice {
  PartitionMode mode = PartitionMode::uniform;  // pipeline.partition's
  std::vector<int> halves_per_stage; // per model stage, in half blocks
  std::string reason;                // one line: what and why
  std::optional<sched::PartitionResult> search;  // auto only: the evaluations behind it
};

/// Layer costs for planning: a short CPU profile (layer_profiler.hpp) when devices.kind is
/// cpu, the cost model at the device's assumed throughput otherwise.
sched::ModelCosts planning_costs(const RunConfig& config);

/// Resolves pipeline.partition. For auto it uses `costs` when given, else planning_costs().
/// REQUIRES: a validated config. Throws InputError when the partitioner finds no partition
/// (see auto_partition).
PartitionChoice choose_partition(const RunConfig& config, const sched::ModelCosts* costs = nullptr);

}  // namespace conveyor
