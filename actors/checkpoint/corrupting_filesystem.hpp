#pragma once
// Fault injection for `fault.inject: corrupt-checkpoint:step=N`: a Filesystem over another
// one that, for the checkpoints of the chosen steps, stores stage 0's shard with one byte
// flipped. The shard writer hashes the bytes it hands over, so the manifest records the
// sha256 of the intended file while the disk holds another one: exactly what a disk that
// lies (or a bit flipped later) leaves behind. Every reader must then reject that
// checkpoint and fall back to an older one (resume.hpp).
// Which file: the temporary file of "stage-0.safetensors" created inside a folder named
// step_dir_name(N). Everything else passes through unchanged.
// Thread-safety: as the wrapped filesystem.
#include <cstdint>
#include <set>
#include <string>

#include "actors/checkpoint/forwarding_filesystem.hpp"

namespace conveyor::checkpoint {

class CorruptingFilesystem final : public ForwardingFilesystem {
 public:
  /// `inner` must outlive this object.
  CorruptingFilesystem(Filesystem& inner, std::set<std::int64_t> steps);

  std::unique_ptr<WritableFile> create(const std::string& path) override;

  /// True when `path` is the file this filesystem corrupts.
  bool corrupts(const std::string& path) const;

 private:
  std::set<std::int64_t> steps_;
};

}  // namespace conveyor::checkpoint
