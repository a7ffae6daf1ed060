#pragma once
// A read-only file for loaders of user-supplied data (corpora, checkpoints): every failure
// is an InputError naming the file, phrased for the person who supplied it.
// Thread-safety: read_at may be called from several threads at once (it uses pread).
#include <cstdint>
#include <string>

namespace conveyor {

class InputFile {
 public:
  /// Opens `path`; `kind` names what it should be ("data file"), `hint` (optional) says
  /// how to fix a wrong path ("check data.path"). Throws InputError when it is missing,
  /// unreadable, a directory or not a regular file (a device, a FIFO).
  InputFile(std::string path, const std::string& kind, const std::string& hint = "");
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }
  std::uint64_t size() const { return size_; }

  /// Reads exactly `bytes` bytes at `offset` into `dst`; throws InputError if it cannot.
  void read_at(void* dst, std::size_t bytes, std::uint64_t offset) const;

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

}  // namespace conveyor
