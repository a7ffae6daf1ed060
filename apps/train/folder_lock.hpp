#pragma once
// One conveyor process at a time per run folder and per checkpoint folder: two runs into
// one --out interleaved their metrics.jsonl rows and left one run's config.yaml beside the
// other's weights; two runs sharing a checkpoint.dir removed each other's checkpoints.
// The lock is flock(2) on the folder itself (no lock file to clean up), held until the
// process ends; the kernel drops it when the process dies, however it dies.
#include <filesystem>
#include <string>

namespace conveyor {

class FolderLock {
 public:
  /// Locks `dir` (which must exist). THROWS InputError naming `what` ("--out",
  /// "checkpoint.dir") when another process holds it, or when it cannot be opened.
  FolderLock(const std::filesystem::path& dir, const std::string& what);
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace conveyor
