#include "apps/config/schedule_spec.hpp"

#include <string>

namespace conveyor {

std::int64_t replica_micro_batches(const RunConfig& config) {
  return config.pipeline.micro_batches / config.parallel.data;
}

std::int64_t chunks_per_stage(const PipelineSection& pipeline) {
  return sched::schedule_chunks(enum_name(pipeline.schedule), pipeline.virtual_stages);
}

sched::ScheduleSpec schedule_spec_of(const RunConfig& config) {
  const auto& pl = config.pipeline;
  return sched::ScheduleSpec{std::string(enum_name(pl.schedule)), static_cast<int>(pl.stages),
                             static_cast<int>(replica_micro_batches(config)),
                             static_cast<int>(pl.virtual_stages)};
}

}  // namespace conveyor
