#include "apps/train/plan_json.hpp"

namespace conveyor {

nlohmann::json plan_json(const TrainingJob& job) {
  using nlohmann::json;
  json stages = json::array();
  for (const auto& rank : job.placement.ranks) {
    json layers = json::array();
    json chunks = json::array();
    for (const auto& c : rank.chunks) {
      auto names = slice_layer_names(c.slice);
      chunks.push_back({{"chunk", c.chunk},
                        {"model_stage", c.model_stage},
                        {"first_block", c.slice.first_block},
                        {"blocks", c.slice.num_blocks},
                        {"layers", names}});
      for (auto& n : names) layers.push_back(n);
    }
    stages.push_back({{"stage", rank.rank},
                      {"replica", rank.replica},
                      {"device", rank.device.str()},
                      {"layers", layers},
                      {"chunks", chunks}});
  }
  json blocks_per_stage = json::array();
  for (int s = 0; s < job.placement.model_stages(); ++s)
    blocks_per_stage.push_back(job.placement.chunk_of(s).slice.num_blocks);
  return {{"schedule", job.schedule.spec.name},
          {"stages", job.schedule.spec.stages},
          {"micro_batches", job.schedule.spec.micro_batches},
          {"virtual_stages", job.schedule.chunks_per_rank()},
          {"partition", job.partition},
          {"blocks_per_stage", blocks_per_stage},
          {"partition_reason", job.partition_reason},
          {"placement", stages}};
}

}  // namespace conveyor
