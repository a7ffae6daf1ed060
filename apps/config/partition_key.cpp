#include "apps/config/partition_key.hpp"

#include <string>
#include <vector>

#include "apps/config/config_value.hpp"

namespace conveyor {
namespace {

std::string show_list(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t k = 0; k < v.size(); ++k) s += (k ? ", " : "") + std::to_string(v[k]);
  return s + "]";
}

[[noreturn]] void expected_partition(const YAML::Node& node) {
  throw ConfigValueError(
      "expected uniform, auto or a list of blocks per model stage such as [3, 3, 2], got " +
      describe_yaml(node));
}

}  // namespace

ConfigKey partition_config_key() {
  ConfigKey key;
  key.name = "pipeline.partition";
  key.allowed = "uniform | auto | list of integers >= 1 (one per model stage, summing to model.layers)";
  key.help =
      "blocks per model stage: uniform (even split), auto (shortest simulated step, from measured "
      "or modelled layer costs) or an explicit list";
  key.set = [](RunConfig& c, const YAML::Node& node) {
    if (node.IsSequence()) {
      const auto blocks = ConfigCodec<std::vector<std::int64_t>>::read(node);
      if (blocks.empty()) expected_partition(node);
      for (std::size_t k = 0; k < blocks.size(); ++k) {
        if (blocks[k] < 1)
          throw ConfigValueError("element " + std::to_string(k) + " of " + show_list(blocks) + " is " +
                                 std::to_string(blocks[k]) +
                                 ": every model stage needs at least 1 block");
      }
      c.pipeline.partition_mode = "explicit";
      c.pipeline.partition_blocks = blocks;
      return;
    }
    if (!node.IsScalar()) expected_partition(node);
    const std::string name = ConfigCodec<std::string>::read(node);
    if (name != "uniform" && name != "auto") expected_partition(node);
    c.pipeline.partition_mode = name;
    c.pipeline.partition_blocks.clear();
  };
  key.get = [](const RunConfig& c) {
    if (c.pipeline.partition_mode == "explicit")
      return ConfigCodec<std::vector<std::int64_t>>::write(c.pipeline.partition_blocks);
    return ConfigCodec<std::string>::write(c.pipeline.partition_mode);
  };
  return key;
}

std::optional<ConfigProblem> check_partition_key(const RunConfig& c) {
  const auto& pl = c.pipeline;
  if (pl.partition_mode != "explicit") return std::nullopt;
  const std::int64_t chunks = pl.schedule == "zbv" ? 2 : pl.virtual_stages;
  const auto model_stages = static_cast<std::size_t>(pl.stages * chunks);
  const std::string list = show_list(pl.partition_blocks);
  if (pl.partition_blocks.size() != model_stages)
    return ConfigProblem{"pipeline.partition",
                         list + " has " + std::to_string(pl.partition_blocks.size()) +
                             " entries, but pipeline.stages " + std::to_string(pl.stages) + " × " +
                             std::to_string(chunks) + " chunk" + (chunks > 1 ? "s" : "") + " per stage make " +
                             std::to_string(model_stages) + " model stages (give one block count each)",
                         "pipeline.stages"};
  std::int64_t sum = 0;
  for (auto b : pl.partition_blocks) sum += b;
  if (sum != c.model.layers)
    return ConfigProblem{"pipeline.partition",
                         list + " sums to " + std::to_string(sum) + " blocks, but model.layers is " +
                             std::to_string(c.model.layers) + " (the counts must add up to it)",
                         "model.layers"};
  return std::nullopt;
}

}  // namespace conveyor
