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
           VerifiedCheckpoints& verified, WriteResult& result) {
  std::vector<CheckpointFolder> all;
  try {
    all = list_checkpoints(fs, checkpoint_dir);
  } catch (const std::exception& e) {
    result.warnings.push_back(std::string("pruning skipped: ") + e.what());
    return;
  }
  const auto remove = [&](const CheckpointFolder& folder) {
    try {
      remove_checkpoint_folder(fs, folder.path);
      result.pruned.push_back(folder.path);
    } catch (const std::exception& e) {
      result.warnings.push_back(std::string("could not remove an old checkpoint: ") + e.what());
    }
  };
  // Newest first: the `keep` newest checkpoints that verify stay (the one just written is
  // one of them). One that does not verify never counts: older than every kept one it
  // goes, newer it stays (it may be readable again later) with a warning.
  int kept = 0;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (it->step == written_step) {
      ++kept;
      continue;
    }
    if (!it->complete) {
      remove(*it);  // the leftover of a failed write
      continue;
    }
    if (verified.intact(fs, it->path)) {
      if (++kept > keep) remove(*it);
      continue;
    }
    if (kept >= keep) {
      remove(*it);
    } else {
      result.warnings.push_back("checkpoint " + it->path +
                                " does not verify: not counted among the kept ones, left in place");
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
                             const Snapshot& snapshot, int keep, VerifiedCheckpoints* verified) {
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
    if (verified) verified->written(result.path, manifest);
  } catch (const CheckpointError& e) {
    // What the failed write left (shards without a manifest, ignored by every reader) goes
    // now, not at the next write: a run that ends here leaves no partial folder behind.
    // Best effort: the write's own error is the one reported.
    try {
      remove_checkpoint_folder(fs, result.path);
    } catch (const std::exception&) {
    }
    throw CheckpointError(e.path(), e.reason() + "; checkpoint of step " + std::to_string(result.step) +
                                        " failed; earlier checkpoints are untouched",
                          e.lost_node());
  }

  // 5. only now may older checkpoints go, and the staging folders of this step and
  // earlier ones (shards other processes wrote, all placed or abandoned by now)
  VerifiedCheckpoints this_call;  // without a writer's memory: every checkpoint hashed now
  prune(fs, checkpoint_dir, result.step, keep, verified ? *verified : this_call, result);
  for (auto& w : remove_staging_before(fs, checkpoint_dir, result.step, /*inclusive=*/true))
    result.warnings.push_back(std::move(w));
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace conveyor::checkpoint
