#pragma once
// The rendezvous server: node 0 hosts it, every host's RendezvousClient talks to it.
// Wire format and conversation: frame.hpp. State: store.hpp.
//
// Threading: one Boost.Asio io thread owned by the server serves every connection with
// coroutines (join/barrier/wait park a coroutine, not a thread). The constructor binds and
// starts the thread; the destructor closes every connection and joins it. dead_ranks()
// and dropped_connections() are safe from any thread.
//
// Hostile or broken peers: a bad length, an unknown type, malformed fields, a frame that
// stops half-way or a peer that stays silent past io_timeout drop that connection only;
// nothing is allocated before the announced length is checked. Each drop or refusal is
// one log line, but at most log_burst of them per log_window: the rest are counted and
// summed up in one line when the window is over (log_throttle.hpp), so that thousands of
// idle connections log a handful of lines, not thousands.
//
// Job tokens: a client is refused unless both sides have the same token or neither has
// one; the refusal says the tokens differ and which side has none (never a token).
// Conflicting joins (one rank claimed by two live processes, different world sizes) fail
// the rendezvous or refuse the newcomer, as store.hpp says.
//
// Standby: a server started as a follower mirrors a primary (store_mirror.hpp feeds it
// through adopt()) and listens from the start, so that clients re-pointed at it
// (store_route.hpp) find it once it is promoted. Until then it answers follow requests
// only (a chain of standbys is possible); any other request waits for promote(), at most
// io_timeout, and then fails with a timeout error saying the server is a standby. A
// follow request on any server parks like a wait and is answered as soon as a mirrored
// change comes, or with no values once its timeout passes.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "transport/rendezvous/error.hpp"
#include "transport/rendezvous/frame.hpp"
#include "transport/rendezvous/status.hpp"

namespace conveyor {

struct RendezvousServerOptions {
  /// The address to listen on (an IP literal or a name that resolves to one). Without a
  /// token, a wildcard address (0.0.0.0, ::) is refused: give the interface to serve.
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;  // 0: an ephemeral port, see RendezvousServer::port()
  /// The job token; empty: no authentication (warned about once, at start).
  std::string token;
  std::uint32_t max_frame_bytes = rendezvous::kDefaultMaxFrameBytes;
  /// The handshake, the rest of a frame once its first bytes came, and each reply write
  /// must finish within this.
  std::chrono::milliseconds io_timeout{10'000};
  /// A connection with no new request for this long is closed (the client reconnects).
  std::chrono::milliseconds idle_timeout{600'000};
  /// Receives one line per dropped connection or warning; default: stderr.
  std::function<void(std::string_view)> log;
  /// Lines about single connections (drops, refusals, failed accepts) written one by one
  /// per window; beyond that they are counted and summed up once the window is over.
  std::size_t log_burst = 5;
  std::chrono::milliseconds log_window{10'000};
  /// Start as a standby's follower: serve nothing but follow until promote().
  bool follower = false;
};

class RendezvousServer {
 public:
  /// Binds and starts serving. Throws RendezvousError(unreachable) when the address
  /// cannot be bound ("rendezvous: cannot listen on 127.0.0.1:29500: Address already in
  /// use"), std::invalid_argument for a wildcard address without a token.
  explicit RendezvousServer(RendezvousServerOptions options);
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  /// The bound port (the ephemeral one when options.port was 0).
  std::uint16_t port() const;
  /// "HOST:PORT" as bound.
  std::string address() const;
  /// Joined ranks silent (no join or heartbeat) for longer than max_silence, ascending.
  std::vector<std::uint32_t> dead_ranks(std::chrono::milliseconds max_silence) const;
  /// Connections dropped for a protocol violation, a timeout or a wrong token.
  std::size_t dropped_connections() const;

  /// A follower takes the primary's changes (store.hpp's adopt) and wakes its own
  /// followers. Fails once promoted or on a world size other than the one mirrored.
  rendezvous::Status adopt(const rendezvous::ChangesReply& changes);
  /// The follower serves as the primary from now on; every joined rank counts as seen
  /// now. Requests waiting for it are served. No effect after the first call (or on a
  /// primary). Safe from any thread.
  void promote();
  /// True for a follower not promoted yet.
  bool following() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace conveyor
