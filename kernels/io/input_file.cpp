#include "kernels/io/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kernels/common/error.hpp"

namespace conveyor {

InputFile::InputFile(std::string path, const std::string& kind, const std::string& hint)
    : path_(std::move(path)) {
  const std::string suffix = hint.empty() ? "" : " (" + hint + ")";
  // Before open: opening a FIFO blocks until a writer comes, and a device has no size.
  struct stat before {};
  if (::stat(path_.c_str(), &before) == 0 && !S_ISREG(before.st_mode) && !S_ISDIR(before.st_mode))
    throw InputError(path_ + ": is not a regular file, so not a " + kind + suffix);
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw InputError(path_ + ": cannot open " + kind + ": " + std::strerror(errno) + suffix);
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    throw InputError(path_ + ": cannot stat " + kind + ": " + std::strerror(err));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd_);
    throw InputError(path_ + ": is a directory, not a " + kind + suffix);
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::read_at(void* dst, std::size_t bytes, std::uint64_t offset) const {
  auto* out = static_cast<char*>(dst);
  while (bytes > 0) {
    const ssize_t got = ::pread(fd_, out, bytes, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      throw InputError(path_ + ": cannot read: " + std::strerror(errno));
    }
    if (got == 0) throw InputError(path_ + ": file shrank while being read");
    out += got;
    bytes -= static_cast<std::size_t>(got);
    offset += static_cast<std::uint64_t>(got);
  }
}

}  // namespace conveyor
