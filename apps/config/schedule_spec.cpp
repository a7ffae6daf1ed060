#include "apps/config/schedule_spec.hpp"

namespace conveyor {

sched::ScheduleSpec schedule_spec_of(const RunConfig& config) {
  const auto& pl = config.pipeline;
  return sched::ScheduleSpec{pl.schedule, static_cast<int>(pl.stages),
                             static_cast<int>(pl.micro_batches / config.parallel.data),
                             static_cast<int>(pl.virtual_stages)};
}

}  // namespace conveyor
