#include "actors/checkpoint/verified_checkpoints.hpp"

#include "actors/checkpoint/reader.hpp"

namespace conveyor::checkpoint {
namespace {

// The manifest unchanged and every shard at its recorded size: what a checkpoint hashed
// before must still show before it is trusted again without hashing.
bool unchanged(Filesystem& fs, const std::string& step_dir, const Manifest& known) {
  if (read_manifest(fs, step_dir) != known) return false;
  for (const auto& shard : known.shards)
    if (fs.open(step_dir + "/" + shard.file)->size() != shard.bytes) return false;
  return true;
}

}  // namespace

bool VerifiedCheckpoints::intact(Filesystem& fs, const std::string& step_dir) {
  try {
    if (const auto it = verified_.find(step_dir); it != verified_.end()) {
      if (unchanged(fs, step_dir, it->second)) return true;
      verified_.erase(it);
      return false;
    }
    verified_.emplace(step_dir, verify_checkpoint(fs, step_dir));
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

void VerifiedCheckpoints::written(const std::string& step_dir, const Manifest& manifest) {
  verified_[step_dir] = manifest;
}

}  // namespace conveyor::checkpoint
