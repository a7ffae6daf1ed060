// IPv6 addresses in rendezvous messages are written as [::1]:PORT, the form --rdzv takes:
// "::1:29500" cannot be told apart from a host "::1:29500" with no port.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "tests/transport/rendezvous/test_server.hpp"

using namespace conveyor;
using conveyor::testing::LogCapture;
using conveyor::testing::client_options;
using conveyor::testing::server_options;
using std::chrono::milliseconds;

namespace {

// A port on ::1 that nothing listens on (bound a moment ago, closed); 0 without IPv6.
int closed_loopback_v6_port() {
  const int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  socklen_t len = sizeof a;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  return ok ? ntohs(a.sin6_port) : 0;
}

}  // namespace

TEST_CASE("a client that cannot reach an IPv6 server names it in brackets") {
  const int port = closed_loopback_v6_port();
  if (port == 0) {
    MESSAGE("skipped: no IPv6 loopback (::1) in this sandbox");
    return;
  }
  RendezvousClientOptions o;
  o.host = "::1";
  o.port = static_cast<std::uint16_t>(port);
  o.connect_timeout = milliseconds(200);
  try {
    RendezvousClient c(o);
    FAIL("nothing listens on ::1 port " << port);
  } catch (const RendezvousError& e) {
    const std::string what = e.what();
    CHECK(what.starts_with("rendezvous: cannot reach [::1]:" + std::to_string(port) + " within 200 ms: "));
  }
}

TEST_CASE("a server on ::1 and its clients' messages write the address in brackets") {
  if (closed_loopback_v6_port() == 0) {
    MESSAGE("skipped: no IPv6 loopback (::1) in this sandbox");
    return;
  }
  LogCapture log;
  auto so = server_options(log);
  so.host = "::1";
  RendezvousServer server(so);
  const std::string address = "[::1]:" + std::to_string(server.port());
  CHECK(server.address() == address);
  auto co = client_options(server);
  co.host = "::1";
  RendezvousClient c(co);
  c.set("k", "v");
  CHECK(c.get("k") == rendezvous::to_bytes("v"));
  // A client without the token is refused, and the log names it as [::1]:ITS_PORT.
  RendezvousClientOptions silent = co;
  silent.token = "";
  CHECK_THROWS_AS(RendezvousClient{silent}, RendezvousError);
  CHECK(log.eventually_contains("rendezvous: refused [::1]:"));
}
