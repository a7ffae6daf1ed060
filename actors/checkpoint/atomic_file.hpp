#pragma once
// One file made visible all at once: written under a temporary name in its final folder,
// fsync'd, closed, checked for size, then renamed over the final name. A reader sees the
// old file, no file, or the whole new file, never a prefix.
// The rename is durable only after the caller's Filesystem::sync_dir() of the folder:
// callers batch that (one folder fsync after all shards, one after the manifest).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "actors/checkpoint/filesystem.hpp"

namespace conveyor::checkpoint {

/// Receives bytes from a producer; returns nothing, throws on failure.
using ByteSink = std::function<void(const void* data, std::size_t bytes)>;

/// Writes `final_path` from what `produce` sends to its sink. Returns the bytes written.
/// On any failure the temporary file is removed (best effort: a crash leaves a hidden
/// ".name.tmp-*" file that nothing reads and the next checkpoint write prunes), the final
/// name is untouched, and a CheckpointError naming the file and the reason is thrown.
std::uint64_t write_file_atomically(Filesystem& fs, const std::string& final_path,
                                    const std::function<void(const ByteSink&)>& produce);

}  // namespace conveyor::checkpoint
