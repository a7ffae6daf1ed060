#pragma once
// `conveyor train --supervise`: this process becomes a supervisor that runs the training
// as a child process (the same binary and arguments) and starts it again when it dies —
// killed, crashed, stopped by the hang watchdog (a stage stuck inside a kernel) or failed —
// from the newest checkpoint (`--resume latest`), up to a number of restarts. A run killed
// before its first checkpoint starts over; the folder of the failed attempt is kept beside
// (OUT.attempt-N). What a restart cannot fix is not retried: bad input (exit 2) ends the
// supervisor with the same code. SIGTERM (or SIGHUP) to the supervisor goes to the child (which
// writes a checkpoint and exits 0, docs/CHECKPOINTS.md) and is not followed by a restart.
//
// A job over several processes: a node other than 0 is started again as it was and
// rejoins the running job (actors/runtime/run_job.hpp). Node 0 hosts the rendezvous store
// and the coordinator, so the job ends with it and every other node then fails; under
// supervisors the whole job starts again: node 0 from its newest checkpoint, every other
// node with `--resume latest` too (the same checkpoint where the folder is shared, which
// the rendezvous checks; a node that finds the job running rejoins and does not use it).
// The child learns its attempt from CONVEYOR_SUPERVISED_ATTEMPT (1, 2, ...): a fault
// injected with `exit:` fires in the first attempt only.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace conveyor {

struct SupervisedRun {
  std::vector<std::string> args;          // `train ...` without --supervise, --out, --resume
  std::filesystem::path out;              // the run folder, fixed for every attempt
  std::filesystem::path checkpoint_dir;   // where `--resume latest` looks
  std::optional<std::string> first_resume;  // the user's --resume, for the first attempt
  std::optional<std::string> init_from;     // the user's --init-from, for each attempt that does not resume
  int max_restarts = 3;
  /// A node other than 0 of a job over several processes: a restarted attempt rejoins
  /// the job if it is running, else (node 0 was lost too) resumes with the others.
  bool rejoins = false;
};

/// Runs the attempts; returns the exit code for the supervisor (0 once an attempt
/// succeeded). Logs every restart on stderr.
int supervise(const SupervisedRun& run);

/// This process's attempt under a supervisor (CONVEYOR_SUPERVISED_ATTEMPT), 1 without one.
int supervised_attempt();
/// True when this process runs under `conveyor train --supervise`.
bool supervised();

/// True when `dir` holds a step-N folder with a manifest (a checkpoint to resume from; it
/// is verified when loaded).
bool holds_checkpoint(const std::filesystem::path& dir);

}  // namespace conveyor
