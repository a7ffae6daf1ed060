#include "apps/bench/model_bench.hpp"

#include <algorithm>

#include "apps/config/config_loader.hpp"

namespace conveyor {

nlohmann::json run_model_bench(const E2eOptions& options) {
  const RunConfig config = load_run_config(options.config, options.overrides);
  // One device: the first of the pipeline's, every block on it, plain gradient
  // accumulation (1F1B on one stage runs each micro-batch's forward then backward).
  E2eOptions single = options;
  single.overrides.push_back("pipeline.stages=1");
  single.overrides.push_back("pipeline.virtual_stages=1");
  single.overrides.push_back("pipeline.schedule=1f1b");
  single.overrides.push_back("pipeline.partition=uniform");
  if (!config.devices.ids.empty())
    single.overrides.push_back("devices.ids=[" + std::to_string(config.devices.ids.front()) + "]");
  nlohmann::json one = run_e2e_bench(single);
  nlohmann::json pipeline = run_e2e_bench(options);

  const double devices = std::max(1, pipeline.at("devices").get<int>());
  const double one_tps = one.at("tokens_per_s").get<double>();
  const double efficiency =
      one_tps > 0 ? pipeline.at("tokens_per_s").get<double>() / (devices * one_tps) : 0.0;
  return {{"bench", "model"},
          {"config", options.config},
          {"one_device", one},
          {"pipeline", pipeline},
          {"pipeline_efficiency", efficiency}};
}

}  // namespace conveyor
