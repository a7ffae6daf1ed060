#pragma once
// Which checkpoints of a folder count when pruning keeps the newest `keep`: only those
// that verify (manifest, partition, every shard's size and sha256: verify_checkpoint). A
// newest folder that cannot be read, or whose shard was damaged, must not count as one
// of the kept while intact older ones are removed.
// Hashing every kept checkpoint at every prune would read gigabytes each time, so one
// writer remembers what it verified (and what it wrote: its shards were hashed as they
// were written): a checkpoint is hashed at most once, then only re-inspected (the same
// manifest, every shard present at its size) at later prunes.
// Thread-safety: one writer thread at a time (the background writer's).
#include <map>
#include <string>

#include "actors/checkpoint/filesystem.hpp"
#include "actors/checkpoint/manifest.hpp"

namespace conveyor::checkpoint {

class VerifiedCheckpoints {
 public:
  /// True when the checkpoint at `step_dir` verifies (see above). Never throws: a
  /// checkpoint that cannot be read is not intact.
  bool intact(Filesystem& fs, const std::string& step_dir);
  /// `step_dir` was just written with `manifest`.
  void written(const std::string& step_dir, const Manifest& manifest);

 private:
  std::map<std::string, Manifest> verified_;  // by step folder
};

}  // namespace conveyor::checkpoint
