#include "actors/checkpoint/atomic_file.hpp"

#include <filesystem>

#include "actors/checkpoint/checkpoint_error.hpp"
#include "actors/checkpoint/layout.hpp"

namespace conveyor::checkpoint {
namespace {

void remove_quietly(Filesystem& fs, const std::string& path) {
  try {
    fs.remove_file(path);
  } catch (...) {
    // The failure being reported matters more; the leftover is hidden and pruned later.
  }
}

}  // namespace

std::uint64_t write_file_atomically(Filesystem& fs, const std::string& final_path,
                                    const std::function<void(const ByteSink&)>& produce) {
  const std::filesystem::path target(final_path);
  const std::string tmp = (target.parent_path() / temp_file_name(target.filename().string())).string();
  std::uint64_t written = 0;
  try {
    auto file = fs.create(tmp);
    produce([&](const void* data, std::size_t bytes) {
      write_fully(*file, data, bytes, tmp);
      written += bytes;
    });
    file->sync();
    file->close();
    // A filesystem that acknowledged bytes it did not keep must not get its file renamed
    // into place; the manifest's sha256 would catch it later, this catches it now.
    const std::uint64_t on_disk = fs.open(tmp)->size();
    if (on_disk != written)
      throw CheckpointError(tmp, "holds " + std::to_string(on_disk) + " bytes after writing " +
                                     std::to_string(written) + " (short write)");
    fs.rename(tmp, final_path);
  } catch (const CheckpointError& e) {
    remove_quietly(fs, tmp);
    throw CheckpointError(e.path(), e.reason() + " (writing " + final_path + ")");
  } catch (...) {
    remove_quietly(fs, tmp);
    throw;
  }
  return written;
}

}  // namespace conveyor::checkpoint
