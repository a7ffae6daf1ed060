#include "apps/config/partition_key.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "actors/plan/schedule/partitioner.hpp"
#include "apps/config/config_value.hpp"
#include "apps/config/schedule_spec.hpp"

namespace conveyor {
namespace {

std::string show_list(const std::vector<std::int64_t>& halves) {
  return sched::format_partition(std::vector<int>(halves.begin(), halves.end()));
}

[[noreturn]] void expected_partition(const YAML::Node& node) {
  throw ConfigValueError(
      "expected uniform, auto or a list of blocks per model stage such as [3, 3, 2] or "
      "[6, 6, 6.5, 5.5], got " + describe_yaml(node));
}

// Element k of the list as half blocks: a number of blocks >= 0.5, a multiple of 0.5 (a
// stage may hold one half of a block: kernels/model/stage_slice.hpp).
std::int64_t read_halves(const YAML::Node& element, std::size_t k) {
  const std::string at = "element " + std::to_string(k) + " (" + describe_yaml(element) + ")";
  if (!element.IsScalar()) throw ConfigValueError(at + " is not a number of blocks");
  double blocks = 0.0;
  try {
    blocks = ConfigCodec<double>::read(element);
  } catch (const ConfigValueError& e) {
    throw ConfigValueError(at + ": " + e.what());
  }
  const double halves = 2.0 * blocks;
  if (!std::isfinite(halves) || halves != std::floor(halves) || halves > 1e9)
    throw ConfigValueError(at + " is not a whole number of half blocks (3, 3.5, ...)");
  if (halves < 1.0)
    throw ConfigValueError(at + ": every model stage needs at least half a block (0.5)");
  return static_cast<std::int64_t>(halves);
}

}  // namespace

ConfigKey partition_config_key() {
  ConfigKey key;
  key.name = "pipeline.partition";
  key.allowed =
      "uniform | auto | list of blocks per model stage, each >= 0.5 and a multiple of 0.5, "
      "summing to model.layers";
  key.help =
      "blocks per model stage: uniform (even split), auto (shortest simulated step, from measured "
      "or modelled layer costs, cutting between a block's attention and MLP halves where that "
      "balances better) or an explicit list (6.5: six blocks and the attention or MLP half of "
      "the next)";
  key.set = [](RunConfig& c, const YAML::Node& node) {
    if (node.IsSequence()) {
      if (node.size() == 0) expected_partition(node);
      std::vector<std::int64_t> halves;
      for (std::size_t k = 0; k < node.size(); ++k) halves.push_back(read_halves(node[k], k));
      c.pipeline.partition_mode = PartitionMode::explicit_list;
      c.pipeline.partition_halves = std::move(halves);
      return;
    }
    if (!node.IsScalar()) expected_partition(node);
    // A name is uniform or auto; "explicit" is what a list makes, not a value to write.
    const auto mode = parse_enum<PartitionMode>(ConfigCodec<std::string>::read(node));
    if (!mode || *mode == PartitionMode::explicit_list) expected_partition(node);
    c.pipeline.partition_mode = *mode;
    c.pipeline.partition_halves.clear();
  };
  key.get = [](const RunConfig& c) {
    if (c.pipeline.partition_mode != PartitionMode::explicit_list)
      return YAML::Node(std::string(enum_name(c.pipeline.partition_mode)));
    YAML::Node list(YAML::NodeType::Sequence);
    list.SetStyle(YAML::EmitterStyle::Flow);
    for (std::int64_t h : c.pipeline.partition_halves) {
      if (h % 2 == 0)
        list.push_back(ConfigCodec<std::int64_t>::write(h / 2));
      else
        list.push_back(ConfigCodec<double>::write(static_cast<double>(h) / 2.0));
    }
    return list;
  };
  return key;
}

std::optional<ConfigProblem> check_partition_key(const RunConfig& c) {
  const auto& pl = c.pipeline;
  if (pl.partition_mode != PartitionMode::explicit_list) return std::nullopt;
  const std::int64_t chunks = chunks_per_stage(pl);
  const auto model_stages = static_cast<std::size_t>(pl.stages * chunks);
  const std::string list = show_list(pl.partition_halves);
  if (pl.partition_halves.size() != model_stages)
    return ConfigProblem{"pipeline.partition",
                         list + " has " + std::to_string(pl.partition_halves.size()) +
                             " entries, but pipeline.stages " + std::to_string(pl.stages) + " × " +
                             std::to_string(chunks) + " chunk" + (chunks > 1 ? "s" : "") + " per stage make " +
                             std::to_string(model_stages) + " model stages (give one block count each)",
                         "pipeline.stages"};
  std::int64_t sum = 0;
  for (auto h : pl.partition_halves) sum += h;
  if (sum != 2 * c.model.layers)
    return ConfigProblem{"pipeline.partition",
                         list + " sums to " + sched::format_half_blocks(sum) + " blocks, but model.layers is " +
                             std::to_string(c.model.layers) + " (the counts must add up to it)",
                         "model.layers"};
  return std::nullopt;
}

}  // namespace conveyor
