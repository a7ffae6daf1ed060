// The real Filesystem: thin wrappers over POSIX calls that turn errno into
// CheckpointError(path, "<call> failed: <strerror>").
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "actors/checkpoint/checkpoint_error.hpp"
#include "actors/checkpoint/filesystem.hpp"

namespace conveyor::checkpoint {
namespace {

[[noreturn]] void fail(const std::string& path, const char* call, int err) {
  throw CheckpointError(path, std::string(call) + " failed: " + std::strerror(err));
}

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  std::size_t write(const void* data, std::size_t bytes) override {
    if (bytes == 0) return 0;
    for (;;) {
      const ssize_t n = ::write(fd_, data, bytes);
      if (n >= 0) return static_cast<std::size_t>(n);
      if (errno != EINTR) fail(path_, "write", errno);
    }
  }
  void sync() override {
    if (::fsync(fd_) != 0) fail(path_, "fsync", errno);
  }
  void close() override {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail(path_, "close", errno);
  }

 private:
  int fd_;
  std::string path_;
};

class PosixReadableFile final : public ReadableFile {
 public:
  PosixReadableFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixReadableFile() override { ::close(fd_); }

  std::size_t read_at(void* out, std::size_t bytes, std::uint64_t offset) override {
    for (;;) {
      const ssize_t n = ::pread(fd_, out, bytes, static_cast<off_t>(offset));
      if (n >= 0) return static_cast<std::size_t>(n);
      if (errno != EINTR) fail(path_, "read", errno);
    }
  }
  std::uint64_t size() override {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) fail(path_, "fstat", errno);
    return static_cast<std::uint64_t>(st.st_size);
  }

 private:
  int fd_;
  std::string path_;
};

class PosixFilesystem final : public Filesystem {
 public:
  std::unique_ptr<WritableFile> create(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) fail(path, "create", errno);
    return std::make_unique<PosixWritableFile>(fd, path);
  }
  std::unique_ptr<ReadableFile> open(const std::string& path) override {
    // O_NONBLOCK: opening a FIFO would wait for a writer forever. Only regular files are
    // checkpoint files: a FIFO, a device (/dev/zero) never ends.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) fail(path, "open", errno);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw CheckpointError(path, "not a regular file");
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return std::make_unique<PosixReadableFile>(fd, path);
  }
  void rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) fail(to, ("rename from " + from).c_str(), errno);
  }
  void sync_dir(const std::string& dir) override {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) fail(dir, "open folder", errno);
    const int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    if (rc != 0) fail(dir, "fsync of folder", err);
  }
  void remove_file(const std::string& path) override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) fail(path, "unlink", errno);
  }
  void remove_all(const std::string& path) override {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    if (ec) throw CheckpointError(path, "remove failed: " + ec.message());
  }
  void make_dirs(const std::string& dir) override {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw CheckpointError(dir, "creating the folder failed: " + ec.message());
  }
  bool exists(const std::string& path) override {
    // Something is there unless the name leads nowhere: a loop of links exists, so that
    // opening it reports the loop rather than "missing".
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 || (errno != ENOENT && errno != ENOTDIR);
  }
  bool is_dir(const std::string& path) override {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }
  std::vector<DirEntry> list(const std::string& dir) override {
    std::vector<DirEntry> out;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code type_ec;
      out.push_back({it->path().filename().string(), it->is_directory(type_ec)});
    }
    if (ec) throw CheckpointError(dir, "listing the folder failed: " + ec.message());
    return out;
  }
};

}  // namespace

Filesystem& posix_filesystem() {
  static PosixFilesystem fs;
  return fs;
}

}  // namespace conveyor::checkpoint
