#include "actors/fault/reshard_checkpoint.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <stdexcept>

#include "actors/checkpoint/reader.hpp"

namespace conveyor {

CheckpointCut reshard_checkpoint(checkpoint::Filesystem& fs, const std::string& step_dir, const JobPlan& to) {
  if (to.shards_optimizer_state())
    throw std::invalid_argument("cutting a checkpoint for replicas that shard their optimizer state "
                                "(optim.shard_state) is not supported");
  checkpoint::Manifest manifest;
  std::vector<std::vector<NamedTensor>> old_stages;  // one per shard: a checkpoint's shards are stages
  try {
    manifest = checkpoint::read_manifest(fs, step_dir);
    for (const auto& shard : manifest.shards)
      old_stages.push_back(read_safetensors((std::filesystem::path(step_dir) / shard.file).string()));
  } catch (const std::exception& e) {
    throw ReshardSnapshotsError(fmt::format("reading checkpoint {}: {}", step_dir, e.what()));
  }
  return {manifest.step, cut_states_for(old_stages, manifest.step, manifest.optimizer_steps, to,
                                        fmt::format("checkpoint {}", step_dir))};
}

}  // namespace conveyor
