#include "transport/ucx/ucx_debug_signal.hpp"

#include <ucs/config/global_opts.h>
#include <ucs/debug/debug.h>

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>

namespace conveyor {
namespace {

// UCX's global options are read through ucs_global_opts_get_value/set_value, never through
// the ucs_global_opts struct: its layout differs between UCX versions (1.13 here, 1.16 on
// the GPU machine, whose libucs the binary loads there), and a field read or written at
// 1.13's offsets would land on another option there.
std::string ucx_option(const char* name) {
  char value[256] = {};
  if (ucs_global_opts_get_value(name, value, sizeof value) != UCS_OK) return {};
  return value;
}

// UCX names signals without "SIG" ("HUP"; UCX_DEBUG_SIGNO, UCX_ERROR_SIGNALS' list).
bool names_signal(const std::string& text, int signal) {
  const char* abbrev = sigabbrev_np(signal);
  if (abbrev == nullptr) return false;
  std::istringstream list(text);
  for (std::string item; std::getline(list, item, ',');) {
    if (item.rfind("SIG", 0) == 0) item.erase(0, 3);
    if (item == abbrev || item == std::to_string(signal)) return true;
  }
  return false;
}

// UCX_ERROR_SIGNALS (ILL, SEGV, BUS, FPE by default) get UCX's backtrace handler when
// UCX_HANDLE_ERRORS is not "none".
bool is_ucx_error_signal(int signal) {
  const std::string handle = ucx_option("HANDLE_ERRORS");
  if (handle.empty() || handle == "none") return false;
  return names_signal(ucx_option("ERROR_SIGNALS"), signal);
}

}  // namespace

bool take_signal_from_ucx(int signal) {
  // No default error signal is a stop signal: one listed there is the user's choice.
  if (is_ucx_error_signal(signal)) return false;
  if (signal <= 0 || !names_signal(ucx_option("DEBUG_SIGNO"), signal)) return true;
  if (std::getenv("UCX_DEBUG_SIGNO") != nullptr) return false;  // asked for: UCX keeps it
  // UCX saved the disposition it replaced; this puts it back and forgets the signal, and
  // debug signal 0 (UCX's "none") keeps UCX's own cleanup at exit from touching it again.
  ucs_debug_disable_signal(signal);
  ucs_global_opts_set_value("DEBUG_SIGNO", "0");
  return true;
}

}  // namespace conveyor
