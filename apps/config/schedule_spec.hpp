#pragma once
// The schedule a run's pipeline.* keys describe, for validation and planning alike.
#include "actors/plan/schedule/schedule.hpp"
#include "apps/config/run_config.hpp"

namespace conveyor {

/// The schedule spec of pipeline.*: one replica's, whose micro-batches are its share
/// pipeline.micro_batches / parallel.data of every step.
sched::ScheduleSpec schedule_spec_of(const RunConfig& config);

}  // namespace conveyor
