#pragma once
// Starting a child process, the one way the project does it (the supervisor's worker,
// `bench serve`'s runs, and the tests' conveyor processes and browser): posix_spawn with
// the child's standard streams, directory, environment, process group and signals as the
// caller asks. What must hold: nothing is left open or allocated in this process when it
// returns or throws; a child that cannot start is an exception naming it and why.
#include <sys/types.h>

#include <string>
#include <vector>

namespace conveyor {

struct SpawnSpec {
  /// The child's argv: its name, then its arguments.
  std::vector<std::string> argv;
  /// The program: a path, or a name looked up on PATH ("/proc/self/exe" is this binary);
  /// empty: argv[0].
  std::string program;
  /// Files for the child's stdin (read), stdout and stderr (created or truncated, 0644);
  /// empty: the child inherits this process's.
  std::string stdin_path, stdout_path, stderr_path;
  std::string working_dir;       // empty: this process's
  std::vector<std::string> env;  // "NAME=value" each; empty: this process's environment
  /// The child leads a process group of its own, so kill(-pid, …) reaches its children.
  bool own_process_group = false;
  /// SIGINT and SIGHUP at their default actions in the child, even where this process
  /// ignores them (a child started under a test runner or nohup).
  bool default_signals = false;
};

/// Starts the child; returns its pid. Throws std::runtime_error "cannot start PROGRAM:
/// REASON" (and std::invalid_argument for an empty argv).
pid_t spawn_process(const SpawnSpec& spec);

}  // namespace conveyor
