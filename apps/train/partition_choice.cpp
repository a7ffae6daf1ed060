#include "apps/train/partition_choice.hpp"

#include <stdexcept>
#include <string>

#include "actors/runtime/layer_profiler.hpp"
#include "actors/plan/schedule/cost_model.hpp"

namespace conveyor {

sched::ModelCosts planning_costs(const RunConfig& config) {
  if (config.devices.kind == DeviceKind::cpu) {
    ProfileOptions options;
    options.micro_batch_size = config.pipeline.micro_batch_size;
    options.seed = config.train.seed;
    return profile_layers(config.model, options);
  }
  return sched::model_costs(config.model, config.pipeline.micro_batch_size,
                            sched::assumed_throughput(std::string(enum_name(config.devices.kind))));
}

PartitionChoice choose_partition(const RunConfig& config, const sched::ModelCosts* costs) {
  const sched::ScheduleSpec spec = schedule_spec_of(config);
  const int layers = static_cast<int>(config.model.layers);
  PartitionChoice choice;
  choice.mode = config.pipeline.partition_mode;
  switch (choice.mode) {
    case PartitionMode::explicit_list:
      choice.halves_per_stage.assign(config.pipeline.partition_halves.begin(),
                                     config.pipeline.partition_halves.end());
      choice.reason = "explicit: " + sched::format_partition(choice.halves_per_stage) +
                      " blocks per model stage, as pipeline.partition gives them";
      return choice;
    case PartitionMode::automatic: {
      sched::PartitionRequest request;
      request.spec = spec;
      request.costs = costs ? *costs : planning_costs(config);
      choice.search = sched::auto_partition(request);
      choice.halves_per_stage = choice.search->halves_per_stage;
      choice.reason = choice.search->explanation;
      return choice;
    }
    case PartitionMode::uniform: {
      const int model_stages = sched::make_schedule(spec).model_stages();
      choice.halves_per_stage = sched::uniform_partition(layers, model_stages);
      choice.reason = "uniform: " + sched::format_partition(choice.halves_per_stage) +
                      " blocks per model stage, as even as possible (pipeline.partition: uniform)";
      return choice;
    }
  }
  throw std::logic_error("pipeline.partition: a mode outside PartitionMode");
}

}  // namespace conveyor
