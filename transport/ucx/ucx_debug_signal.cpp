#include "transport/ucx/ucx_debug_signal.hpp"

#include <ucs/config/global_opts.h>
#include <ucs/debug/debug.h>

#include <cstdlib>

namespace conveyor {
namespace {

// UCX_ERROR_SIGNALS (ILL, SEGV, BUS, FPE by default) get UCX's backtrace handler when
// UCX_HANDLE_ERRORS is not "none".
bool is_ucx_error_signal(int signal) {
  if (ucs_global_opts.handle_errors == 0) return false;
  const auto& errors = ucs_global_opts.error_signals;
  for (unsigned i = 0; i < errors.count; ++i)
    if (errors.signals[i] == signal) return true;
  return false;
}

}  // namespace

bool take_signal_from_ucx(int signal) {
  // No default error signal is a stop signal: one listed there is the user's choice.
  if (is_ucx_error_signal(signal)) return false;
  if (signal <= 0 || ucs_global_opts.debug_signo != static_cast<unsigned>(signal)) return true;
  if (std::getenv("UCX_DEBUG_SIGNO") != nullptr) return false;  // asked for: UCX keeps it
  // UCX saved the disposition it replaced; this puts it back and forgets the signal (so
  // UCX's own cleanup at exit leaves it alone). debug_signo 0 is UCX's "no debug signal".
  ucs_debug_disable_signal(signal);
  ucs_global_opts.debug_signo = 0;
  return true;
}

}  // namespace conveyor
