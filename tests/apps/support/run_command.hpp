#pragma once
// Runs a program as a child process for end-to-end tests of the `conveyor` command:
// stdout and stderr are captured into separate strings, stdin reads /dev/null, and a
// deadline bounds the run: a child still running at the deadline is killed (SIGKILL) and
// reported as timed out, so a hung command fails its test instead of hanging the suite.
// Header-only, POSIX (fork/exec, poll); no doctest here, so any test can use it.
// REQUIRES: called from a single thread (between fork and exec the child makes only
// async-signal-safe calls, but the pipes it inherits are the caller's).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace conveyor::testing {

struct CommandResult {
  int exit_code = -1;      // the child's exit status; 128 + signal when it was killed
  std::string out;         // everything it wrote on stdout
  std::string err;         // everything it wrote on stderr
  bool timed_out = false;  // killed at the deadline
  double seconds = 0;      // wall time of the run
};

struct CommandOptions {
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
  std::string cwd;  // working directory of the child; empty: the caller's
};

/// Runs `argv[0]` (a path, not searched in PATH) with arguments argv[1..] and waits for
/// it, at most `options.timeout`. Throws std::runtime_error when the child cannot be
/// started (pipe or fork failure); an exec failure shows as exit code 127 with the reason
/// on `err`.
inline CommandResult run_command(const std::vector<std::string>& argv,
                                 const CommandOptions& options = {}) {
  if (argv.empty()) throw std::invalid_argument("run_command: empty argv");
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto deadline = start + options.timeout;

  // Everything the child needs is built before fork: it may not allocate afterwards.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const char* cwd = options.cwd.empty() ? nullptr : options.cwd.c_str();

  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("run_command: pipe: ") + std::strerror(errno));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    const std::string why = std::strerror(errno);
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    throw std::runtime_error("run_command: pipe: " + why);
  }

  const pid_t pid = ::fork();
  if (pid < 0) {
    const std::string why = std::strerror(errno);
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    throw std::runtime_error("run_command: fork: " + why);
  }
  if (pid == 0) {  // the child: only async-signal-safe calls until exec
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    ::dup2(out_pipe[1], STDOUT_FILENO);  // dup2 clears O_CLOEXEC on the copies
    ::dup2(err_pipe[1], STDERR_FILENO);
    if (cwd && ::chdir(cwd) != 0) {
      static const char msg[] = "run_command: chdir failed\n";
      (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
      ::_exit(127);
    }
    ::execv(args[0], args.data());
    static const char msg[] = "run_command: exec failed\n";
    (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(127);
  }

  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  CommandResult result;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
    if (left <= 0) {
      result.timed_out = true;
      break;
    }
    const int n = ::poll(fds, 2, static_cast<int>(std::min<long long>(left, 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2 && n > 0; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(got));
      } else if (got == 0 || errno != EINTR) {  // end of file (or a broken pipe)
        ::close(fds[i].fd);
        fds[i].fd = -1;  // poll ignores negative fds
        --open_fds;
      }
    }
  }
  for (auto& p : fds)
    if (p.fd >= 0) ::close(p.fd);

  // The pipes can close before the child exits (or it may have closed them itself): wait
  // for it under the same deadline, then kill it.
  int status = 0;
  if (result.timed_out) ::kill(pid, SIGKILL);
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, result.timed_out ? 0 : WNOHANG);
    if (w == pid) break;
    if (w < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (clock::now() >= deadline) {
      result.timed_out = true;
      ::kill(pid, SIGKILL);  // the blocking waitpid reaps it on the next turn
      continue;
    }
    ::usleep(2000);
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) result.exit_code = 128 + WTERMSIG(status);
  result.seconds = std::chrono::duration<double>(clock::now() - start).count();
  return result;
}

}  // namespace conveyor::testing
