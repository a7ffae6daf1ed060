#pragma once
// The TCP connections of a connected Gloo context, held so that they can be ended from
// any thread: the one way found to wake a rank that waits inside gloo::allreduce for a
// peer that never sends (a frozen process keeps its sockets open, so nothing arrives and
// nothing fails until the operation's timeout).
//
// Measured with the installed Gloo (libgloo-dev 0.0~git20220518): closing this rank's
// pairs from another thread (gloo::Context::closeConnections, transport::Pair::close)
// does NOT wake the waiting rank: a pair's close only unregisters and closes its socket,
// it signals no pending operation; the wait ends at its timeout. shutdown(2) of the
// socket does: Gloo's I/O thread reads end-of-file and fails every pending operation of
// the pair ("Connection closed by peer"), as when a peer's process dies. Gloo's Pair
// keeps its descriptor to itself, so the socket is found by its local address (which the
// pair reports) among this process's descriptors and duplicated: the duplicate keeps
// the descriptor number ours (Gloo may close its own at any time, and the number be
// reused), and shutdown acts on the socket, not on a descriptor.
//
// What must hold: take() runs once the mesh is connected and before any operation (every
// pair's local address is then its connected socket's). While a duplicate is open the
// socket outlives Gloo's close of it, so its peer would not see the connection end: the
// group calls shut_down() whenever it breaks, and the duplicates close on destruction.
// Thread-safety: shut_down() from any thread, at any time, any number of times.
#include <vector>

namespace gloo {
class Context;
}

namespace conveyor {

class GlooPeerSockets {
 public:
  GlooPeerSockets() = default;
  /// Duplicates the socket of every pair of `context` (all ranks but its own). Throws
  /// std::runtime_error naming the peer whose socket is not found.
  static GlooPeerSockets take(gloo::Context& context);
  ~GlooPeerSockets();
  GlooPeerSockets(GlooPeerSockets&& other) noexcept;
  GlooPeerSockets& operator=(GlooPeerSockets&& other) noexcept;
  GlooPeerSockets(const GlooPeerSockets&) = delete;
  GlooPeerSockets& operator=(const GlooPeerSockets&) = delete;

  /// Ends every connection in both directions: pending operations on them fail at once,
  /// on this rank and on the peers.
  void shut_down() const;

 private:
  std::vector<int> descriptors_;
};

}  // namespace conveyor
