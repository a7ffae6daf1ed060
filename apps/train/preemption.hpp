#pragma once
// A stop asked of a run by a signal: SIGTERM as a preemption notice (what Slurm,
// Kubernetes and cloud schedulers send before they kill a job), SIGINT as a person's
// Ctrl-C, SIGHUP as the hang-up of the terminal or ssh session the run was started from
// (treated as SIGTERM: the person is gone, the work is kept). The handler only records it; the coordinator sees it at the next step boundary
// or between an evaluation's waves (train_checkpoints.hpp), writes a checkpoint and ends
// the run cleanly. A second Ctrl-C ends the process at once, as SIGINT by default does
// (the checkpoints written so far are whole: they are written atomically).
// Thread-safety: the flag is a lock-free atomic, set from the handler, read anywhere.

#include <string>

namespace conveyor {

/// Installs the handlers (once per process; later calls do nothing). From then on SIGTERM,
/// SIGHUP and a first SIGINT no longer kill the process: the run must poll stop_signal().
/// A SIGINT or SIGHUP ignored when the process started (a background job's, nohup's) stays
/// ignored. SIGHUP is taken back from UCX's debug handler first (ucx_debug_signal.hpp),
/// unless the user set UCX_DEBUG_SIGNO to it: then it stays UCX's.
void catch_stop_signals();

/// 0 until SIGTERM, SIGINT or SIGHUP arrived after catch_stop_signals(); then the first.
int stop_signal();

/// "SIGTERM", "SIGINT" or "SIGHUP" (the stopped row's reason).
const char* stop_signal_name(int signal);

/// Across processes: another node's stop (node k forwards the signal it caught to node 0,
/// whose coordinator stops the whole job). The first stop, local or forwarded, counts.
void note_peer_stop(int node, int signal);
/// The node whose signal stopped the run: -1 for this process's own (or none).
int stop_node();
/// "SIGTERM", or "SIGTERM to node 1" for a forwarded one.
std::string stop_reason();

}  // namespace conveyor
