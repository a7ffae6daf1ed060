#include "kernels/common/spawn_process.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace conveyor {
namespace {

std::vector<char*> pointers(std::vector<std::string>& texts) {
  std::vector<char*> out;
  for (auto& t : texts) out.push_back(t.data());
  out.push_back(nullptr);
  return out;
}

// posix_spawn's attribute objects, released however spawn_process leaves.
struct SpawnAttributes {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  SpawnAttributes() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnAttributes() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;
};

}  // namespace

pid_t spawn_process(const SpawnSpec& spec) {
  if (spec.argv.empty()) throw std::invalid_argument("spawn_process: no program given");
  SpawnAttributes a;
  if (!spec.stdin_path.empty())
    posix_spawn_file_actions_addopen(&a.actions, STDIN_FILENO, spec.stdin_path.c_str(), O_RDONLY,
                                     0);
  const int out_flags = O_WRONLY | O_CREAT | O_TRUNC;
  if (!spec.stdout_path.empty())
    posix_spawn_file_actions_addopen(&a.actions, STDOUT_FILENO, spec.stdout_path.c_str(), out_flags,
                                     0644);
  if (!spec.stderr_path.empty())
    posix_spawn_file_actions_addopen(&a.actions, STDERR_FILENO, spec.stderr_path.c_str(), out_flags,
                                     0644);
  if (!spec.working_dir.empty())
    posix_spawn_file_actions_addchdir_np(&a.actions, spec.working_dir.c_str());
  short flags = 0;
  if (spec.own_process_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&a.attr, 0);
  }
  if (spec.default_signals) {
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGHUP);
    posix_spawnattr_setsigdefault(&a.attr, &defaults);
    flags |= POSIX_SPAWN_SETSIGDEF;
  }
  posix_spawnattr_setflags(&a.attr, flags);
  std::vector<std::string> argv = spec.argv, env = spec.env;
  std::vector<char*> cargv = pointers(argv), cenv = pointers(env);
  const std::string& program = spec.program.empty() ? spec.argv.front() : spec.program;
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, program.c_str(), &a.actions, &a.attr, cargv.data(),
                                spec.env.empty() ? environ : cenv.data());
  if (rc != 0) throw std::runtime_error("cannot start " + program + ": " + std::strerror(rc));
  return pid;
}

}  // namespace conveyor
