#pragma once
// The schedule and the placement of model pieces on ranks, built together because the
// schedule decides which (rank, chunk) holds which model stage.
#include "actors/placement.hpp"
#include "actors/schedule/schedule.hpp"

namespace conveyor {

struct PipelineLayout {
  sched::Schedule schedule;
  Placement placement;
};

/// Throws InputError when the spec is invalid or `layers` cannot fill every model stage.
PipelineLayout make_pipeline_layout(const sched::ScheduleSpec& spec, int layers);

}  // namespace conveyor
