#pragma once
// Reads a file that another process appends lines to (metrics.jsonl), a little at a time:
// each read() returns the whole lines written since the last one. A last line without its
// newline is being written: it is kept back until its newline comes. A file that shrank
// (a resumed run drops a partial last row: apps/train/metrics_log.cpp) or was replaced
// is read again from its start, and reset() says so, so the reader rebuilds what it made
// of the old lines.
//
// Thread-safety: none; one reader per object.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace conveyor::watch {

class JsonlTail {
 public:
  explicit JsonlTail(std::filesystem::path file) : path_(std::move(file)) {}

  struct Lines {
    std::vector<std::string> lines;  // whole lines, without their newline
    bool restarted = false;          // the file shrank or was replaced: lines are from its start
    bool more = false;               // max_bytes were read and the file holds more
  };
  /// The whole lines appended since the last call; none while the file does not exist.
  /// At most max_bytes are read per call (the rest comes with the next ones: `more`), so
  /// memory stays bounded on a huge file. Throws std::runtime_error naming the file when it
  /// exists and cannot be read.
  Lines read(std::size_t max_bytes = 16u << 20);
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::uint64_t offset_ = 0;    // bytes consumed, the partial line's included
  std::uint64_t inode_ = 0;     // of the file read so far (0: none yet)
  std::string partial_;         // a last line without its newline, so far
};

}  // namespace conveyor::watch
