#pragma once
// Fault injection for `fault.inject: slow-checkpoint:step=N:ms=D`: a Filesystem over
// another one that, for the checkpoint of a chosen step, waits D milliseconds before it
// creates the manifest's temporary file. The shards are on disk by then and the manifest
// is not, so for D ms the checkpoint is half written: what a slow disk, or a fault that
// strikes during a write, leaves. Tests use it to lose a node while a checkpoint is being
// written, deterministically. What must hold: the checkpoint is neither changed nor
// reordered, only late; a reader meanwhile sees a folder without manifest.json, which
// is never a candidate (layout.hpp).
// Which file: the temporary file of manifest.json created inside a folder named
// step_dir_name(N). Everything else passes through at once.
// Thread-safety: as the wrapped filesystem; the wait blocks the writing thread only.
#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "actors/checkpoint/forwarding_filesystem.hpp"

namespace conveyor::checkpoint {

class StallingFilesystem final : public ForwardingFilesystem {
 public:
  /// `inner` must outlive this object; `stalls`: the wait before each step's manifest.
  StallingFilesystem(Filesystem& inner, std::map<std::int64_t, std::chrono::milliseconds> stalls);

  std::unique_ptr<WritableFile> create(const std::string& path) override;

  /// How long creating `path` waits: the stall of its step for a manifest's temporary file,
  /// else zero.
  std::chrono::milliseconds stall_of(const std::string& path) const;

 private:
  std::map<std::int64_t, std::chrono::milliseconds> stalls_;
};

}  // namespace conveyor::checkpoint
