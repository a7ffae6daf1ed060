#include "apps/watch/jsonl_tail.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace conveyor::watch {
namespace {

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

JsonlTail::Lines JsonlTail::read(std::size_t max_bytes) {
  Lines out;
  const Fd file{::open(path_.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) {
    if (errno == ENOENT) return out;  // not written yet
    throw std::runtime_error(path_.string() + ": cannot open: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(file.fd, &st) != 0)
    throw std::runtime_error(path_.string() + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw std::runtime_error(path_.string() + ": is not a regular file");
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if ((inode_ != 0 && st.st_ino != inode_) || size < offset_) {
    out.restarted = offset_ > 0;
    offset_ = 0;
    partial_.clear();
  }
  inode_ = st.st_ino;
  std::string chunk(static_cast<std::size_t>(std::min<std::uint64_t>(size - offset_, max_bytes)), '\0');
  std::size_t got = 0;
  while (got < chunk.size()) {
    const ssize_t n = ::pread(file.fd, chunk.data() + got, chunk.size() - got,
                              static_cast<off_t>(offset_ + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(path_.string() + ": cannot read: " + std::strerror(errno));
    if (n == 0) break;  // shrank under us: the next call starts again
    got += static_cast<std::size_t>(n);
  }
  chunk.resize(got);
  offset_ += got;
  out.more = offset_ < size;
  std::size_t from = 0;
  for (std::size_t nl; (nl = chunk.find('\n', from)) != std::string::npos; from = nl + 1) {
    partial_.append(chunk, from, nl - from);
    out.lines.push_back(std::move(partial_));
    partial_.clear();
  }
  partial_.append(chunk, from, std::string::npos);
  return out;
}

}  // namespace conveyor::watch
