#include "actors/plan/pipeline_layout.hpp"

#include <fmt/format.h>

#include "actors/plan/schedule/partitioner.hpp"
#include "kernels/common/error.hpp"

namespace conveyor {

PipelineLayout make_pipeline_layout(const sched::ScheduleSpec& spec, int layers) {
  PipelineLayout layout;
  layout.schedule = sched::make_schedule(spec);
  const auto& schedule = layout.schedule;
  const int ranks = spec.stages;
  const int chunks = schedule.chunks_per_rank();
  if (layers < ranks * chunks)
    throw InputError(fmt::format(
        "model.layers: {} layers cannot fill {} model stages ({} stages × {} chunks each); "
        "use at least {} layers or fewer stages",
        layers, ranks * chunks, ranks, chunks, ranks * chunks));
  layout.placement =
      make_placement(sched::uniform_partition(layers, ranks * chunks), ranks, chunks,
                     [&](int r, int c) { return schedule.model_stage(r, c); });
  return layout;
}

PipelineLayout make_pipeline_layout(const sched::ScheduleSpec& spec, int layers,
                                    const std::vector<int>& halves_per_model_stage) {
  PipelineLayout layout;
  layout.schedule = sched::make_schedule(spec);
  const auto& schedule = layout.schedule;
  sched::check_partition(halves_per_model_stage, layers, schedule.model_stages());
  layout.placement = make_placement(halves_per_model_stage, spec.stages, schedule.chunks_per_rank(),
                                    [&](int r, int c) { return schedule.model_stage(r, c); });
  return layout;
}

}  // namespace conveyor
