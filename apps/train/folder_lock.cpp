#include "apps/train/folder_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

#include "kernels/common/error.hpp"

namespace conveyor {

FolderLock::FolderLock(const std::filesystem::path& dir, const std::string& what) {
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0)
    throw InputError(fmt::format("{} {}: cannot open the folder to lock it: {}", what, dir.string(),
                                 std::strerror(errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  const int error = errno;
  ::close(fd_);
  fd_ = -1;
  if (error == EWOULDBLOCK)
    throw InputError(fmt::format("{} {}: in use by another conveyor process (one run per folder at a time; "
                                 "wait for it or choose another folder)",
                                 what, dir.string()));
  throw InputError(fmt::format("{} {}: cannot lock the folder: {}", what, dir.string(), std::strerror(error)));
}

FolderLock::~FolderLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

}  // namespace conveyor
