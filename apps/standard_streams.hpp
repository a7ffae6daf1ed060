#pragma once
// The process's standard streams at its start and at its end.
//
// A process started with fd 0, 1 or 2 closed (`conveyor train ... 2>&-`, some daemons'
// launchers) would hand that number to the next file it opens: log lines would then land
// in a checkpoint shard or the metrics file. Those fds are opened on /dev/null first.
// At the end, output that could not be written (stdout on a full disk, a closed pipe) is
// an error: `--format json > out.json` never exits 0 with a truncated file.
namespace conveyor {

/// Opens /dev/null on each of fds 0, 1, 2 that is closed. Call first thing in main().
void reopen_closed_standard_streams();

/// Logs must never end a run: SIGPIPE is ignored (a closed `2>&1 | head` killed the process
/// silently at its next log line), and `stderr` becomes a stream on fd 2 whose writes
/// always succeed: after the first failure (a closed pipe, a full disk) the rest of the log
/// is dropped. Output on stdout still fails loudly (check_standard_output). Call in main()
/// before anything logs.
void make_logging_unbreakable();

/// Flushes stdout; if that or an earlier write to it failed, says so on stderr and
/// returns a failure code (kExitFailed, or `code` when it is already one). Else `code`.
int check_standard_output(int code);

}  // namespace conveyor
