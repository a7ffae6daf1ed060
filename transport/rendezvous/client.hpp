#pragma once
// A host's handle on the rendezvous server (server.hpp; wire format: frame.hpp).
//
// Threading: one request at a time per client (calls are serialized by a mutex), so a
// rank that must heartbeat while it waits in join/barrier/wait uses a second client.
// Every call is bounded: blocking ones by their timeout (plus io_timeout for the reply to
// travel), the others by io_timeout. A connection the server closed while idle is
// re-established (with the handshake) before the next request; a request that fails
// mid-way is not resent.
// Errors: RendezvousError (error.hpp); every message starts with "rendezvous: ".
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "transport/rendezvous/error.hpp"
#include "transport/rendezvous/frame.hpp"
#include "transport/rendezvous/store_route.hpp"

namespace conveyor {

struct RendezvousClientOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  /// When set, host and port above are ignored: the server's address is read from the
  /// route on each (re)connect, and a request after the route moved reconnects first
  /// (store_route.hpp). Clients sharing one route move together.
  std::shared_ptr<rendezvous::StoreRoute> route;
  /// The job token (same on every host); empty when the server runs without one.
  std::string token;
  /// How long to keep retrying the connection (the server may start later).
  std::chrono::milliseconds connect_timeout{30'000};
  /// Bound on each write and on a reply's travel (added to a request's own timeout).
  std::chrono::milliseconds io_timeout{10'000};
  std::uint32_t max_frame_bytes = rendezvous::kDefaultMaxFrameBytes;
  /// This process as the server tells it apart from others (Auth::process) and names it
  /// in messages (Auth::origin). Empty: this process's own (a random id drawn once per
  /// process; "host NAME, pid PID"), the same for every client in it. Tests set them to
  /// play several processes.
  std::string process;
  std::string origin;
};

/// This host's clocks against the server's: server time = local time + offset.
struct ClockOffset {
  std::chrono::nanoseconds steady{0};  // std::chrono::steady_clock
  std::chrono::nanoseconds system{0};  // std::chrono::system_clock
  std::chrono::nanoseconds rtt{0};     // of the round trip both offsets come from
};

class RendezvousClient {
 public:
  /// Connects and authenticates, retrying refused connections until connect_timeout.
  /// Throws RendezvousError: unreachable, refused ("rendezvous: refused: wrong job token:
  /// the job tokens differ"; also when only one side has a token).
  explicit RendezvousClient(RendezvousClientOptions options);
  ~RendezvousClient();
  RendezvousClient(const RendezvousClient&) = delete;
  RendezvousClient& operator=(const RendezvousClient&) = delete;

  /// Registers as `rank` of `world_size` and returns once every rank joined. Joining
  /// again (after a restart) is allowed. Throws RendezvousError(timeout) naming the
  /// missing ranks, (invalid_request) for a rank out of range, a world size or a rank
  /// that conflicts with another process's (store.hpp), naming both.
  void join(std::uint32_t rank, std::uint32_t world_size, std::chrono::milliseconds timeout);
  /// REQUIRES: join() succeeded. Returns once every rank reached barrier `name`; a name
  /// can be reused for the next barrier. On timeout names the ranks that did not arrive.
  void barrier(std::string_view name, std::chrono::milliseconds timeout);

  void set(std::string_view key, std::span<const std::uint8_t> value);
  void set(std::string_view key, std::string_view value);
  std::optional<rendezvous::Bytes> get(std::string_view key);
  /// The value of `key` once some rank set it.
  rendezvous::Bytes wait(std::string_view key, std::chrono::milliseconds timeout);

  /// REQUIRES: join() succeeded. Marks this rank alive now.
  void heartbeat();
  /// Joined ranks with no join or heartbeat for longer than max_silence, ascending.
  std::vector<std::uint32_t> dead_ranks(std::chrono::milliseconds max_silence);

  /// What changed in the server's store after its seq `since_seq` (a standby mirroring
  /// it: store_mirror.hpp), once something did or `timeout` passed (then no values).
  /// Throws RendezvousError(invalid_request) when the store is behind since_seq.
  rendezvous::ChangesReply follow(std::int64_t since_seq, std::chrono::milliseconds timeout);

  /// NTP-style estimate over `rounds` round trips; the min-RTT one is kept.
  ClockOffset clock_offset(int rounds = 8);

  /// The rank given to join(); nullopt before.
  std::optional<std::uint32_t> rank() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

namespace rendezvous {
/// Bytes ↔ text for values that are strings.
Bytes to_bytes(std::string_view text);
std::string to_text(std::span<const std::uint8_t> bytes);
}  // namespace rendezvous

}  // namespace conveyor
