#pragma once
// --serve [HOST:]PORT: where the status server listens. PORT alone binds 127.0.0.1 (this
// machine only); HOST:PORT binds HOST, an IPv4 address, a name, or an IPv6 address in
// brackets ([::1]:8080). Port 0 picks a free port (the server's log line names it).
// A server reachable from other machines must have a token (serve_auth.hpp): requires_token().
#include <cstdint>
#include <string>
#include <string_view>

namespace conveyor::watch {

struct ServeAddress {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  bool host_given = false;
  /// True unless the host is a loopback address (127.0.0.0/8, ::1, localhost).
  bool requires_token() const;
};

/// Parses `value` of the flag `flag` (for the message). Throws InputError naming the flag
/// and the value: "--serve 'x:y': the port must be a number from 0 to 65535".
ServeAddress parse_serve_address(std::string_view flag, std::string_view value);

/// The environment variable that holds the token (never a flag: a command line is visible
/// to every user of the machine, and never the config: config.yaml is written to the run
/// folder and into every checkpoint).
inline constexpr const char* kServeTokenVariable = "CONVEYOR_SERVE_TOKEN";

}  // namespace conveyor::watch
