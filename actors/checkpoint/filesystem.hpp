#pragma once
// The filesystem as the checkpoint library sees it: the few calls it needs, behind an
// interface that tests replace to inject faults (a failing or short write, a failing
// fsync or rename, a crash between two calls). The real one is posix_filesystem().
//
// Contract every implementation keeps:
// - Every failure throws CheckpointError naming the path and the reason (errno text).
// - create() makes a new file and fails if the name exists (no silent overwrite).
// - rename() replaces the target atomically (POSIX rename(2)); it is durable only after
//   sync_dir() of the folder holding it.
// Thread-safety: implementations are safe to call from several threads at once.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace conveyor::checkpoint {

/// A file open for writing, from its first byte on.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  /// Writes up to `bytes`; returns how many were written, which may be fewer (the caller
  /// loops) but is never 0 unless `bytes` is 0.
  virtual std::size_t write(const void* data, std::size_t bytes) = 0;
  /// Flushes the file's data and size to the device (fsync).
  virtual void sync() = 0;
  /// Closes; later calls are errors. A destructor without close() closes quietly.
  virtual void close() = 0;
};

/// A file open for reading.
class ReadableFile {
 public:
  virtual ~ReadableFile() = default;
  /// Reads up to `bytes` at `offset`; returns how many were read (0 at the end).
  virtual std::size_t read_at(void* out, std::size_t bytes, std::uint64_t offset) = 0;
  virtual std::uint64_t size() = 0;
};

struct DirEntry {
  std::string name;  // the last component, not the full path
  bool is_dir = false;
};

class Filesystem {
 public:
  virtual ~Filesystem() = default;
  virtual std::unique_ptr<WritableFile> create(const std::string& path) = 0;
  virtual std::unique_ptr<ReadableFile> open(const std::string& path) = 0;
  virtual void rename(const std::string& from, const std::string& to) = 0;
  /// Makes the entries of `dir` (creations, renames, removals) durable.
  virtual void sync_dir(const std::string& dir) = 0;
  /// Removes one file; a missing file is not an error.
  virtual void remove_file(const std::string& path) = 0;
  /// Removes a folder and everything in it; a missing folder is not an error.
  virtual void remove_all(const std::string& path) = 0;
  /// Creates `dir` and its missing parents.
  virtual void make_dirs(const std::string& dir) = 0;
  virtual bool exists(const std::string& path) = 0;
  virtual bool is_dir(const std::string& path) = 0;
  /// The entries of `dir`, in no particular order. Throws when `dir` cannot be read.
  virtual std::vector<DirEntry> list(const std::string& dir) = 0;
};

/// The real filesystem (POSIX calls). A process-wide instance.
Filesystem& posix_filesystem();

/// Reads a whole (small) file, e.g. a manifest. Throws CheckpointError naming the path.
/// Throws CheckpointError for a file larger than `max_bytes` (not read).
std::string read_whole_file(Filesystem& fs, const std::string& path, std::uint64_t max_bytes);

/// Writes all of `bytes`, looping over short writes. Throws CheckpointError naming `path`
/// when the file accepts no more bytes (a full disk).
void write_fully(WritableFile& file, const void* data, std::size_t bytes, const std::string& path);

}  // namespace conveyor::checkpoint
