#include "apps/train/preemption.hpp"

#include <signal.h>

#include <atomic>
#include <cstring>

namespace conveyor {
namespace {

std::atomic<bool> g_sigterm{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

void on_sigterm(int) { g_sigterm.store(true, std::memory_order_relaxed); }

}  // namespace

void catch_sigterm() {
  static const bool installed = [] {
    struct sigaction action;
    std::memset(&action, 0, sizeof action);
    action.sa_handler = on_sigterm;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    return ::sigaction(SIGTERM, &action, nullptr) == 0;
  }();
  (void)installed;
}

bool sigterm_received() { return g_sigterm.load(std::memory_order_relaxed); }

}  // namespace conveyor
