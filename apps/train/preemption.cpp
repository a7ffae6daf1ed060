#include "apps/train/preemption.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "transport/ucx/ucx_debug_signal.hpp"

namespace conveyor {
namespace {

std::atomic<int> g_signal{0};
std::atomic<int> g_node{-1};  // set before g_signal for a forwarded stop
static_assert(std::atomic<int>::is_always_lock_free, "set from a signal handler");

void on_stop_signal(int signal) {
  int none = 0;
  if (g_signal.compare_exchange_strong(none, signal, std::memory_order_relaxed)) {
    if (signal == SIGINT) {
      // write(2) alone: async-signal-safe.
      static const char note[] =
          "\nconveyor: Ctrl-C: stopping at the next step boundary with a checkpoint; "
          "Ctrl-C again exits at once\n";
      [[maybe_unused]] const auto n = ::write(STDERR_FILENO, note, sizeof note - 1);
    }
    return;
  }
  if (signal != SIGINT) return;
  // A second Ctrl-C: die of SIGINT, as without the handler.
  ::signal(SIGINT, SIG_DFL);
  ::raise(SIGINT);
}

bool install(int signal) {
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  if (signal != SIGTERM) {  // left ignored where the process started with it ignored (nohup)
    struct sigaction was;
    if (::sigaction(signal, nullptr, &was) == 0 && was.sa_handler == SIG_IGN) return true;
  }
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  return ::sigaction(signal, &action, nullptr) == 0;
}

// SIGHUP is UCX's debug signal unless the user chose another (ucx_debug_signal.hpp): it
// is taken back first, which also restores a nohup's SIG_IGN that UCX replaced.
bool install_hangup() { return !take_signal_from_ucx(SIGHUP) || install(SIGHUP); }

}  // namespace

void catch_stop_signals() {
  static const bool installed = install(SIGTERM) && install(SIGINT) && install_hangup();
  (void)installed;
}

int stop_signal() { return g_signal.load(std::memory_order_relaxed); }

const char* stop_signal_name(int signal) {
  switch (signal) {
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    default: return "SIGTERM";
  }
}

void note_peer_stop(int node, int signal) {
  if (g_signal.load(std::memory_order_acquire) != 0) return;
  g_node.store(node, std::memory_order_release);
  int none = 0;
  // A signal of this process's own that came in between wins: it is not the peer's.
  const int stop = signal == SIGINT || signal == SIGHUP ? signal : SIGTERM;
  if (!g_signal.compare_exchange_strong(none, stop, std::memory_order_acq_rel))
    g_node.store(-1, std::memory_order_release);
}

int stop_node() { return stop_signal() != 0 ? g_node.load(std::memory_order_acquire) : -1; }

std::string stop_reason() {
  const std::string name = stop_signal_name(stop_signal());
  const int node = stop_node();
  return node < 0 ? name : name + " to node " + std::to_string(node);
}

}  // namespace conveyor
