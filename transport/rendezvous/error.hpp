#pragma once
// What a rendezvous caller sees when an operation fails, and the text helpers that keep
// every message in the same shape ("rendezvous: timed out after 5 s waiting for rank 1,
// rank 3 to join"). Every message starts with "rendezvous: ".
#include <chrono>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace conveyor {

enum class RendezvousErrc {
  timeout,          // the condition (join, barrier, key) did not hold before the deadline
  refused,          // the server refused the handshake (wrong job token)
  unreachable,      // no connection to the server before the connect deadline
  address_in_use,   // the server's port is taken (another job, or one not yet ended)
  protocol,         // the peer sent bytes that are not a valid frame
  invalid_request,  // the server rejected the request (rank out of range, ...)
  disconnected,     // the connection broke or went silent during an operation
};

class RendezvousError : public std::runtime_error {
 public:
  RendezvousError(RendezvousErrc code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  RendezvousErrc code() const noexcept { return code_; }

 private:
  RendezvousErrc code_;
};

namespace rendezvous {

/// "5 s" for whole seconds, "250 ms" otherwise.
std::string describe_duration(std::chrono::milliseconds d);
/// "rank 1, rank 3"; "no rank" when empty.
std::string describe_ranks(std::span<const std::uint32_t> ranks);
/// "10.0.0.1:29500", "node01:29500", and "[::1]:29500" for an IPv6 address: the form
/// --rdzv takes (a bare "::1:29500" reads as a host with no port).
std::string host_port(std::string_view host, unsigned port);

}  // namespace rendezvous
}  // namespace conveyor
