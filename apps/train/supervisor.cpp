#include "apps/train/supervisor.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "transport/ucx/ucx_debug_signal.hpp"
#include "kernels/common/spawn_process.hpp"

extern char** environ;

namespace conveyor {
namespace {

namespace fs = std::filesystem;

std::atomic<pid_t> g_child{0};
std::atomic<bool> g_stopping{false};

// SIGTERM (and SIGINT, SIGHUP) are for the child: it checkpoints and ends; no restart follows.
// Forwarded as SIGTERM: a terminal's Ctrl-C reaches the child already (one process
// group), and a second SIGINT from here would be its "Ctrl-C again: exit at once".
void forward_signal(int) {
  g_stopping = true;
  if (const pid_t child = g_child.load(); child > 0) ::kill(child, SIGTERM);
}

void install_forwarding() {
  struct sigaction sa {};
  sa.sa_handler = forward_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  // A hang-up, unless nohup's (left ignored, as the child inherits it) or the user gave
  // it to UCX (UCX_DEBUG_SIGNO, ucx_debug_signal.hpp).
  struct sigaction hangup {};
  if (take_signal_from_ucx(SIGHUP) && ::sigaction(SIGHUP, nullptr, &hangup) == 0 &&
      hangup.sa_handler != SIG_IGN)
    ::sigaction(SIGHUP, &sa, nullptr);
}

// Starts the same binary with `args`; the child inherits stdin, stdout and stderr.
pid_t start_child(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"conveyor"};
  argv.insert(argv.end(), args.begin(), args.end());
  try {
    return spawn_process({.argv = argv, .program = "/proc/self/exe"});
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(fmt::format("--supervise: the worker: {}", e.what()));
  }
}

// Waits for the child; its status as waitpid gives it.
int wait_child(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      throw std::runtime_error(fmt::format("--supervise: waiting for the worker: {}", std::strerror(errno)));
  return status;
}

std::string describe(int status) {
  if (WIFEXITED(status)) return fmt::format("exit code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("signal {} ({})", WTERMSIG(status), ::strsignal(WTERMSIG(status)));
  return "an unknown status";
}

// Moves a failed attempt's folder aside so the next one starts in an empty --out.
void set_aside(const fs::path& out, int attempt) {
  if (!fs::exists(out)) return;
  fs::path aside = out.string() + fmt::format(".attempt-{}", attempt);
  for (int n = 2; fs::exists(aside); ++n) aside = out.string() + fmt::format(".attempt-{}-{}", attempt, n);
  fs::rename(out, aside);
  fmt::print(stderr, "conveyor train --supervise: attempt {} left no checkpoint; its folder is now {}\n",
             attempt, aside.string());
}

}  // namespace

int supervised_attempt() {
  const char* text = std::getenv("CONVEYOR_SUPERVISED_ATTEMPT");
  if (!text) return 1;
  const int n = std::atoi(text);
  return n >= 1 ? n : 1;
}

bool supervised() { return std::getenv("CONVEYOR_SUPERVISED_ATTEMPT") != nullptr; }

bool holds_checkpoint(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().filename().string().rfind("step-", 0) == 0 &&
        fs::exists(entry.path() / "manifest.json", ec))
      return true;
  return false;
}

int supervise(const SupervisedRun& run) {
  install_forwarding();
  for (int attempt = 1;; ++attempt) {
    std::vector<std::string> args = run.args;
    args.insert(args.end(), {"--out", run.out.string()});
    std::string from = "the start";
    const std::string rejoin = "the running job, which it rejoins";
    if (attempt == 1 && run.first_resume) {
      args.insert(args.end(), {"--resume", *run.first_resume});
      from = *run.first_resume;
    } else if (attempt > 1 && holds_checkpoint(run.checkpoint_dir)) {
      args.insert(args.end(), {"--resume", "latest"});
      from = "the newest checkpoint in " + run.checkpoint_dir.string();
      if (run.rejoins) from = rejoin + ", or else (the whole job starts again) " + from;
    } else if (attempt > 1 && run.rejoins) {
      from = rejoin + ", or else the start";
    } else if (attempt > 1) {
      set_aside(run.out, attempt - 1);
    }
    // Until the run has a checkpoint of its own, each start is the run's start.
    if (run.init_from && std::find(args.begin(), args.end(), "--resume") == args.end())
      args.insert(args.end(), {"--init-from", *run.init_from});
    if (attempt > 1)
      fmt::print(stderr, "conveyor train --supervise: starting attempt {} of {} from {}\n", attempt,
                 run.max_restarts + 1, from);
    ::setenv("CONVEYOR_SUPERVISED_ATTEMPT", std::to_string(attempt).c_str(), 1);
    const pid_t pid = start_child(args);
    g_child = pid;
    if (g_stopping) ::kill(pid, SIGTERM);  // a stop that came while starting it
    const int status = wait_child(pid);
    g_child = 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 2) return 2;  // bad input: fails again
    if (g_stopping) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    fmt::print(stderr, "conveyor train --supervise: attempt {} ended with {}\n", attempt, describe(status));
    if (attempt > run.max_restarts) {
      fmt::print(stderr, "conveyor train --supervise: giving up after {} restarts\n", run.max_restarts);
      return 1;
    }
  }
}

}  // namespace conveyor
