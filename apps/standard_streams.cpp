#include "apps/standard_streams.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "apps/exit_code.hpp"

namespace conveyor {

void reopen_closed_standard_streams() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    // The lowest free number is `fd` itself, as every lower one is open by now.
    const int opened = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (opened >= 0 && opened != fd) {
      ::dup2(opened, fd);
      ::close(opened);
    }
  }
}

namespace {

ssize_t write_log(void*, const char* data, size_t size) {
  static bool broken = false;  // fd 2 failed once: the reader is gone, or the disk full
  for (size_t done = 0; !broken && done < size;) {
    const ssize_t n = ::write(STDERR_FILENO, data + done, size - done);
    if (n > 0)
      done += static_cast<size_t>(n);
    else if (n < 0 && errno != EINTR)
      broken = true;
  }
  return static_cast<ssize_t>(size);  // a log line is never an error
}

}  // namespace

void make_logging_unbreakable() {
  ::signal(SIGPIPE, SIG_IGN);
  cookie_io_functions_t io{};
  io.write = write_log;
  if (FILE* log = ::fopencookie(nullptr, "w", io)) {
    std::setvbuf(log, nullptr, _IONBF, 0);  // unbuffered, as stderr: lines interleave whole
    stderr = log;
  }
}

int check_standard_output(int code) {
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  if (flushed && !std::ferror(stdout)) return code;
  const int error = errno;
  std::fprintf(stderr, "error: writing to standard output failed%s%s\n", error ? ": " : "",
               error ? std::strerror(error) : "");
  return code == kExitOk ? kExitFailed : code;
}

}  // namespace conveyor
