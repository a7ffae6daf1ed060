// A client and a server whose job tokens differ never talk: a token on one side only is
// as much a mismatch as two different tokens. Both sides say the tokens differ; neither
// ever prints a token.
#include <doctest/doctest.h>

#include <string>

#include "tests/transport/rendezvous/test_server.hpp"

using namespace conveyor;
using conveyor::testing::LogCapture;
using conveyor::testing::client_options;
using conveyor::testing::server_options;

namespace {

// The refusal's message, or "accepted".
std::string handshake(const RendezvousServer& server, const std::string& token) {
  try {
    RendezvousClient c(client_options(server, token));
    c.set("k", "v");
  } catch (const RendezvousError& e) {
    CHECK(e.code() == RendezvousErrc::refused);
    return e.what();
  }
  return "accepted";
}

}  // namespace

TEST_CASE("a server without a job token refuses a client that has one, saying the tokens differ") {
  LogCapture log;
  RendezvousServer server(server_options(log, ""));
  const std::string e = handshake(server, "client-secret-1");
  CHECK(e == "rendezvous: refused: the job tokens differ: this process has a job token, the "
             "rendezvous server has none");
  CHECK(log.eventually_contains("the job tokens differ: the client has a job token, the server has none"));
  CHECK(log.all().find("client-secret-1") == std::string::npos);
  CHECK(server.dropped_connections() == 1);
  CHECK(handshake(server, "") == "accepted");
}

TEST_CASE("a server with a job token refuses a client without one, saying the tokens differ") {
  LogCapture log;
  RendezvousServer server(server_options(log, "server-secret-2"));
  CHECK(handshake(server, "") == "rendezvous: refused: the job tokens differ: the rendezvous server "
                                 "has a job token, this process has none");
  CHECK(log.eventually_contains("the job tokens differ: the server has a job token, the client has none"));
  CHECK(log.all().find("server-secret-2") == std::string::npos);
}

TEST_CASE("two different job tokens are refused as a wrong job token, and neither is printed") {
  LogCapture log;
  RendezvousServer server(server_options(log, "server-secret-3"));
  const std::string e = handshake(server, "client-secret-3");
  CHECK(e == "rendezvous: refused: wrong job token: the job tokens differ");
  CHECK(e.find("secret") == std::string::npos);
  CHECK(log.eventually_contains("wrong job token: the job tokens differ"));
  CHECK(log.all().find("secret") == std::string::npos);
  CHECK(handshake(server, "server-secret-3") == "accepted");
}
