#include "actors/checkpoint/checkpoint_writer.hpp"

#include <chrono>
#include <set>
#include <stdexcept>

#include "actors/checkpoint/atomic_file.hpp"
#include "actors/checkpoint/checkpoint_error.hpp"
#include "actors/checkpoint/layout.hpp"
#include "actors/checkpoint/shard_writer.hpp"
#include "actors/checkpoint/staged_shards.hpp"

namespace conveyor::checkpoint {
namespace {

void check_snapshot(const Snapshot& snapshot, int keep) {
  if (keep < 1) throw std::invalid_argument("write_checkpoint: keep must be at least 1, got " + std::to_string(keep));
  if (snapshot.shards.empty()) throw std::invalid_argument("write_checkpoint: the snapshot has no shards");
  std::set<int> stages;
  for (const auto& s : snapshot.shards) {
    if (!stages.insert(s.stage).second)
      throw std::invalid_argument("write_checkpoint: two shards for stage " + std::to_string(s.stage));
    if (s.produce && !s.place)
      throw std::invalid_argument("write_checkpoint: stage " + std::to_string(s.stage) +
                                  "'s shard is not produced yet (Snapshot::materialize)");
  }
}

// Removes a step folder so that no crash point leaves a manifest naming missing shards.
void remove_checkpoint_folder(Filesystem& fs, const std::string& path) {
  const std::string manifest = path + "/" + kManifestFile;
  if (fs.exists(manifest)) {
    fs.remove_file(manifest);
    fs.sync_dir(path);
  }
  fs.remove_all(path);
}

void prune(Filesystem& fs, const std::string& checkpoint_dir, std::int64_t written_step, int keep,
           WriteResult& result) {
  std::vector<CheckpointFolder> all;
  try {
    all = list_checkpoints(fs, checkpoint_dir);
  } catch (const std::exception& e) {
    result.warnings.push_back(std::string("pruning skipped: ") + e.what());
    return;
  }
  int complete_seen = 0;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (it->step == written_step) {
      ++complete_seen;
      continue;
    }
    if (it->complete && ++complete_seen <= keep) continue;
    try {
      remove_checkpoint_folder(fs, it->path);
      result.pruned.push_back(it->path);
    } catch (const std::exception& e) {
      result.warnings.push_back(std::string("could not remove an old checkpoint: ") + e.what());
    }
  }
  try {
    fs.sync_dir(checkpoint_dir);
  } catch (const std::exception& e) {
    result.warnings.push_back(std::string("pruning not durable: ") + e.what());
  }
}

}  // namespace

WriteResult write_checkpoint(Filesystem& fs, const std::string& checkpoint_dir,
                             const Snapshot& snapshot, int keep) {
  check_snapshot(snapshot, keep);
  const auto start = std::chrono::steady_clock::now();
  WriteResult result;
  result.step = snapshot.manifest.step;
  result.path = checkpoint_dir + "/" + step_dir_name(result.step);
  try {
    // 1. a fresh, empty step folder
    fs.make_dirs(checkpoint_dir);
    if (fs.exists(result.path)) remove_checkpoint_folder(fs, result.path);
    fs.make_dirs(result.path);
    fs.sync_dir(checkpoint_dir);

    // 2. shards, 3. made durable before the manifest can exist
    Manifest manifest = snapshot.manifest;
    manifest.format_version = kManifestVersion;
    manifest.shards.clear();
    for (const auto& shard : snapshot.shards) {
      manifest.shards.push_back(shard.place ? shard.place(fs, result.path)
                                            : write_shard(fs, result.path, shard.stage, shard.tensors));
      result.bytes += manifest.shards.back().bytes;
      if (shard.place) result.placed_bytes += manifest.shards.back().bytes;
    }
    fs.sync_dir(result.path);

    // 4. the manifest, last
    const std::string text = encode_manifest(manifest);
    result.bytes += write_file_atomically(fs, result.path + "/" + kManifestFile,
                                          [&](const ByteSink& sink) { sink(text.data(), text.size()); });
    fs.sync_dir(result.path);
  } catch (const CheckpointError& e) {
    throw CheckpointError(e.path(), e.reason() + "; checkpoint of step " + std::to_string(result.step) +
                                        " failed; earlier checkpoints are untouched",
                          e.lost_node());
  }

  // 5. only now may older checkpoints go, and the staging folders of this step and
  // earlier ones (shards other processes wrote, all placed or abandoned by now)
  prune(fs, checkpoint_dir, result.step, keep, result);
  for (auto& w : remove_staging_before(fs, checkpoint_dir, result.step, /*inclusive=*/true))
    result.warnings.push_back(std::move(w));
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace conveyor::checkpoint
