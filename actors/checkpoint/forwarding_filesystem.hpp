#pragma once
// A Filesystem that passes every call to another one: the base of the filesystems that
// fault injection puts over the real disk (corrupting_filesystem.hpp, a disk that lies;
// stalling_filesystem.hpp, one that stalls), which override only the calls they change.
// Thread-safety: as the wrapped filesystem.
#include <memory>
#include <string>
#include <vector>

#include "actors/checkpoint/filesystem.hpp"

namespace conveyor::checkpoint {

class ForwardingFilesystem : public Filesystem {
 public:
  /// `inner` must outlive this object.
  explicit ForwardingFilesystem(Filesystem& inner) : inner_(inner) {}

  std::unique_ptr<WritableFile> create(const std::string& path) override { return inner_.create(path); }
  std::unique_ptr<ReadableFile> open(const std::string& path) override { return inner_.open(path); }
  void rename(const std::string& from, const std::string& to) override { inner_.rename(from, to); }
  void sync_dir(const std::string& dir) override { inner_.sync_dir(dir); }
  void remove_file(const std::string& path) override { inner_.remove_file(path); }
  void remove_all(const std::string& path) override { inner_.remove_all(path); }
  void make_dirs(const std::string& dir) override { inner_.make_dirs(dir); }
  bool exists(const std::string& path) override { return inner_.exists(path); }
  bool is_dir(const std::string& path) override { return inner_.is_dir(path); }
  std::vector<DirEntry> list(const std::string& dir) override { return inner_.list(dir); }

 protected:
  Filesystem& inner_;
};

}  // namespace conveyor::checkpoint
