#pragma once
// The schedule a run's pipeline.* keys describe, for validation and planning alike, and
// the numbers derived from those keys, each computed here only.
#include <cstdint>

#include "actors/plan/schedule/schedule.hpp"
#include "apps/config/run_config.hpp"

namespace conveyor {

/// The micro-batches one data-parallel replica computes in a step: its share
/// pipeline.micro_batches / parallel.data. REQUIRES: parallel.data >= 1 (validation
/// also holds that it divides pipeline.micro_batches).
std::int64_t replica_micro_batches(const RunConfig& config);

/// Model chunks per pipeline stage: 2 for zbv, whatever pipeline.virtual_stages says,
/// else pipeline.virtual_stages (as sched::spec_chunks counts them).
std::int64_t chunks_per_stage(const PipelineSection& pipeline);

/// The schedule spec of pipeline.*: one replica's, over replica_micro_batches().
sched::ScheduleSpec schedule_spec_of(const RunConfig& config);

}  // namespace conveyor
