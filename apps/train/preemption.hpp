#pragma once
// A stop asked of a run by a signal: SIGTERM as a preemption notice (what Slurm,
// Kubernetes and cloud schedulers send before they kill a job), SIGINT as a person's
// Ctrl-C. The handler only records it; the coordinator sees it at the next step boundary
// or between an evaluation's waves (train_checkpoints.hpp), writes a checkpoint and ends
// the run cleanly. A second Ctrl-C ends the process at once, as SIGINT by default does
// (the checkpoints written so far are whole: they are written atomically).
// Thread-safety: the flag is a lock-free atomic, set from the handler, read anywhere.

#include <string>

namespace conveyor {

/// Installs the handlers (once per process; later calls do nothing). From then on SIGTERM
/// and a first SIGINT no longer kill the process: the run must poll stop_signal(). A
/// SIGINT ignored when the process started (a background job's) stays ignored.
void catch_stop_signals();

/// 0 until SIGTERM or SIGINT arrived after catch_stop_signals(); then the first of them.
int stop_signal();

/// "SIGTERM" or "SIGINT" (the stopped row's reason).
const char* stop_signal_name(int signal);

/// Across processes: another node's stop (node k forwards the signal it caught to node 0,
/// whose coordinator stops the whole job). The first stop, local or forwarded, counts.
void note_peer_stop(int node, int signal);
/// The node whose signal stopped the run: -1 for this process's own (or none).
int stop_node();
/// "SIGTERM", or "SIGTERM to node 1" for a forwarded one.
std::string stop_reason();

}  // namespace conveyor
