#include "actors/checkpoint/filesystem.hpp"

#include "actors/checkpoint/checkpoint_error.hpp"

namespace conveyor::checkpoint {

std::string read_whole_file(Filesystem& fs, const std::string& path, std::uint64_t max_bytes) {
  auto file = fs.open(path);
  const std::uint64_t size = file->size();
  if (size > max_bytes)
    throw CheckpointError(path, "file is " + std::to_string(size) + " bytes, more than the " +
                                    std::to_string(max_bytes) + " such a file can be");
  std::string bytes(size, '\0');
  std::uint64_t done = 0;
  while (done < size) {
    const std::size_t n = file->read_at(bytes.data() + done, size - done, done);
    if (n == 0)
      throw CheckpointError(path, "file shrank while being read (" + std::to_string(done) +
                                      " of " + std::to_string(size) + " bytes)");
    done += n;
  }
  return bytes;
}

void write_fully(WritableFile& file, const void* data, std::size_t bytes, const std::string& path) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const std::size_t n = file.write(p, bytes);
    if (n == 0) throw CheckpointError(path, "write accepted 0 bytes (disk full?)");
    p += n;
    bytes -= n;
  }
}

}  // namespace conveyor::checkpoint
