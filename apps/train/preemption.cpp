#include "apps/train/preemption.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

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
  if (signal == SIGINT) {  // left ignored where the process started with it ignored
    struct sigaction was;
    if (::sigaction(SIGINT, nullptr, &was) == 0 && was.sa_handler == SIG_IGN) return true;
  }
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  return ::sigaction(signal, &action, nullptr) == 0;
}

}  // namespace

void catch_stop_signals() {
  static const bool installed = install(SIGTERM) && install(SIGINT);
  (void)installed;
}

int stop_signal() { return g_signal.load(std::memory_order_relaxed); }

const char* stop_signal_name(int signal) { return signal == SIGINT ? "SIGINT" : "SIGTERM"; }

void note_peer_stop(int node, int signal) {
  if (g_signal.load(std::memory_order_acquire) != 0) return;
  g_node.store(node, std::memory_order_release);
  int none = 0;
  // A signal of this process's own that came in between wins: it is not the peer's.
  if (!g_signal.compare_exchange_strong(none, signal == SIGINT ? SIGINT : SIGTERM, std::memory_order_acq_rel))
    g_node.store(-1, std::memory_order_release);
}

int stop_node() { return stop_signal() != 0 ? g_node.load(std::memory_order_acquire) : -1; }

std::string stop_reason() {
  const std::string name = stop_signal_name(stop_signal());
  const int node = stop_node();
  return node < 0 ? name : name + " to node " + std::to_string(node);
}

}  // namespace conveyor
