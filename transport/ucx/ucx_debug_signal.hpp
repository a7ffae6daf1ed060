#pragma once
// UCX's "debug signal" (UCX_DEBUG_SIGNO, SIGHUP by default): libucs installs a handler
// for it as it loads (its library constructor, before main and before any ucp_init), and
// that handler only raises UCX's log level and returns. A process that links UCX and
// does nothing about it survives a hang-up unchanged: SIGHUP neither stops nor kills it.
// Setting UCX_DEBUG_SIGNO before ucp_init is too late for that: libucs read its global
// options (UCX_DEBUG_SIGNO, UCX_HANDLE_ERRORS, UCX_ERROR_SIGNALS) when it loaded.
// Thread-safety: call from the main thread before other threads use UCX (it changes a
// process-wide signal disposition and UCX's global options).

namespace conveyor {

/// Takes `signal` back from UCX's debug handler, restoring what the process had before
/// libucs loaded (SIG_DFL, or SIG_IGN under nohup), so that the caller may handle it.
/// Returns false, and changes nothing, when UCX holds `signal` by the user's choice: the
/// environment sets UCX_DEBUG_SIGNO to it, or UCX_ERROR_SIGNALS lists it. Returns true
/// when the signal is now the caller's: UCX did not hold it, or no longer does. Idempotent.
bool take_signal_from_ucx(int signal);

}  // namespace conveyor
