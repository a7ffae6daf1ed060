#pragma once
// SIGTERM as a preemption notice (what Slurm, Kubernetes and cloud schedulers send before
// they kill a job): the handler only records it; the coordinator sees it at the next step
// boundary (train_checkpoints.hpp), writes a checkpoint and ends the run cleanly.
// Thread-safety: the flag is a lock-free atomic, set from the handler, read anywhere.

namespace conveyor {

/// Installs the handler (once per process; later calls do nothing). From then on SIGTERM
/// no longer kills the process: the run must poll sigterm_received().
void catch_sigterm();

/// True once SIGTERM arrived after catch_sigterm().
bool sigterm_received();

}  // namespace conveyor
