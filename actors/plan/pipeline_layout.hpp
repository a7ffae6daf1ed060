#pragma once
// The schedule and the placement of model pieces on ranks, built together because the
// schedule decides which (rank, chunk) holds which model stage.
#include <vector>

#include "actors/plan/placement.hpp"
#include "actors/plan/schedule/schedule.hpp"

namespace conveyor {

struct PipelineLayout {
  sched::Schedule schedule;
  Placement placement;
};

/// Throws InputError when the spec is invalid or `layers` cannot fill every model stage.
PipelineLayout make_pipeline_layout(const sched::ScheduleSpec& spec, int layers);

/// The same with the half blocks of each model stage given (pipeline.partition: an explicit
/// list or what the partitioner chose). Throws InputError naming pipeline.partition unless
/// there is one count per model stage, each >= 1, summing to 2 * `layers`.
PipelineLayout make_pipeline_layout(const sched::ScheduleSpec& spec, int layers,
                                    const std::vector<int>& halves_per_model_stage);

}  // namespace conveyor
