#include <doctest/doctest.h>

#include <atomic>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/transport/rendezvous/test_server.hpp"

using namespace conveyor;
using conveyor::testing::LogCapture;
using conveyor::testing::client_options;
using conveyor::testing::error_of;
using conveyor::testing::run_ranks;
using conveyor::testing::server_options;
using rendezvous::to_bytes;
using rendezvous::to_text;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using Ranks = std::vector<std::uint32_t>;

TEST_CASE("four ranks join, meet at barriers and exchange values through the store") {
  LogCapture log;
  RendezvousServer server(server_options(log));
  run_ranks(4, [&](std::uint32_t rank) {
    RendezvousClient c(client_options(server));
    c.join(rank, 4, milliseconds(5000));
    CHECK(c.rank() == rank);
    c.set("addr/" + std::to_string(rank), "host-" + std::to_string(rank));
    c.barrier("addresses", milliseconds(5000));
    for (std::uint32_t k = 0; k < 4; ++k) {
      const std::string key = "addr/" + std::to_string(k);
      CHECK(to_text(c.wait(key, milliseconds(1000))) == "host-" + std::to_string(k));
      CHECK(c.get(key) == to_bytes("host-" + std::to_string(k)));
    }
    if (rank == 0) c.set("nccl-id", std::string_view("\x00\x01\xff", 3));
    CHECK(c.wait("nccl-id", milliseconds(5000)) == rendezvous::Bytes{0, 1, 255});
    c.barrier("addresses", milliseconds(5000));  // the same name, the next barrier
    CHECK(!c.get("never set"));
  });
  CHECK(server.dropped_connections() == 0);
}

TEST_CASE("a rank that never joins makes join time out naming the missing ranks") {
  LogCapture log;
  RendezvousServer server(server_options(log));
  std::vector<std::string> errors(2);
  const auto start = Clock::now();
  run_ranks(2, [&](std::uint32_t i) {
    RendezvousClient c(client_options(server));
    errors[i] = error_of([&] { c.join(i * 2, 4, milliseconds(300)); });  // ranks 0 and 2
  });
  const auto took = Clock::now() - start;
  for (const auto& e : errors)
    CHECK(e == "rendezvous: timed out after 300 ms waiting for rank 1, rank 3 to join");
  CHECK(took >= milliseconds(300));
  CHECK(took < milliseconds(2000));
}

TEST_CASE("a join with a rank outside the world is rejected") {
  LogCapture log;
  RendezvousServer server(server_options(log));
  RendezvousClient c(client_options(server));
  try {
    c.join(5, 4, milliseconds(100));
    FAIL("join should throw");
  } catch (const RendezvousError& e) {
    CHECK(e.code() == RendezvousErrc::invalid_request);
    CHECK(std::string(e.what()) == "rendezvous: rank 5 is out of range for world size 4");
  }
}

TEST_CASE("a barrier and a wait that time out name what they waited for") {
  LogCapture log;
  RendezvousServer server(server_options(log));
  RendezvousClient c0(client_options(server));
  RendezvousClient c1(client_options(server));
  std::thread t([&] { c1.join(1, 2, milliseconds(2000)); });
  c0.join(0, 2, milliseconds(2000));
  t.join();
  CHECK(error_of([&] { c0.barrier("x", milliseconds(200)); }) ==
        "rendezvous: timed out after 200 ms at barrier \"x\" waiting for rank 1");
  CHECK(error_of([&] { c0.wait("k", milliseconds(100)); }) ==
        "rendezvous: timed out after 100 ms waiting for key \"k\"");
  // the timed-out arrival was withdrawn: rank 1 alone does not complete barrier x
  CHECK(error_of([&] { c1.barrier("x", milliseconds(100)); }) ==
        "rendezvous: timed out after 100 ms at barrier \"x\" waiting for rank 0");
}

TEST_CASE("a wrong job token is refused and the right one still works afterwards") {
  LogCapture log;
  RendezvousServer server(server_options(log));
  try {
    RendezvousClient bad(client_options(server, "not-the-token"));
    FAIL("the handshake should be refused");
  } catch (const RendezvousError& e) {
    CHECK(e.code() == RendezvousErrc::refused);
    CHECK(std::string(e.what()) == "rendezvous: refused: wrong job token: the job tokens differ");
  }
  CHECK(error_of([&] { RendezvousClient none(client_options(server, "")); }) ==
        "rendezvous: refused: the job tokens differ: the rendezvous server has a job token, this "
        "process has none");
  CHECK(log.eventually_contains("wrong job token"));
  CHECK(server.dropped_connections() == 2);
  RendezvousClient good(client_options(server));
  good.set("k", "v");
  CHECK(good.get("k") == to_bytes("v"));
}

TEST_CASE("a server without a token binds the given address only and warns once") {
  LogCapture log;
  RendezvousServer server(server_options(log, ""));
  CHECK(server.address() == "127.0.0.1:" + std::to_string(server.port()));
  RendezvousClient c(client_options(server, ""));
  c.set("k", "v");
  CHECK(c.get("k") == to_bytes("v"));
  CHECK(log.all().find("no job token") != std::string::npos);
  CHECK(log.all().find("no job token") == log.all().rfind("no job token"));

  LogCapture log2;
  auto wildcard = server_options(log2, "");
  wildcard.host = "0.0.0.0";
  CHECK_THROWS_AS(RendezvousServer{wildcard}, std::invalid_argument);
}

TEST_CASE("a port already in use is a clear error naming the address") {
  LogCapture log;
  RendezvousServer first(server_options(log));
  auto options = server_options(log);
  options.port = first.port();
  try {
    RendezvousServer second(options);
    FAIL("the second bind should fail");
  } catch (const RendezvousError& e) {
    const std::string what = e.what();
    CHECK(what.find("rendezvous: cannot listen on 127.0.0.1:" + std::to_string(first.port())) == 0);
    CHECK(what.find("Address already in use") != std::string::npos);
  }
}

TEST_CASE("a client retries until a server that starts later is up") {
  std::uint16_t port = 0;
  LogCapture log;
  {
    RendezvousServer probe(server_options(log));  // find a free port, then free it
    port = probe.port();
  }
  RendezvousClientOptions co;
  co.port = port;
  co.token = "job-token";
  co.connect_timeout = milliseconds(3000);
  std::unique_ptr<RendezvousServer> server;
  std::thread starter([&] {
    std::this_thread::sleep_for(milliseconds(150));
    auto so = server_options(log);
    so.port = port;
    server = std::make_unique<RendezvousServer>(so);
  });
  const auto start = Clock::now();
  RendezvousClient c(co);  // connection refused at first
  CHECK(Clock::now() - start >= milliseconds(100));
  starter.join();
  c.set("k", "v");
  CHECK(c.get("k") == to_bytes("v"));
}

TEST_CASE("a client gives up at its connect deadline when nobody listens") {
  std::uint16_t port = 0;
  {
    LogCapture log;
    RendezvousServer probe(server_options(log));
    port = probe.port();
  }
  RendezvousClientOptions co;
  co.port = port;
  co.connect_timeout = milliseconds(200);
  const auto start = Clock::now();
  try {
    RendezvousClient c(co);
    FAIL("nobody listens");
  } catch (const RendezvousError& e) {
    CHECK(e.code() == RendezvousErrc::unreachable);
    CHECK(std::string(e.what()) == "rendezvous: cannot reach 127.0.0.1:" + std::to_string(port) +
                                       " within 200 ms: Connection refused");
  }
  CHECK(Clock::now() - start < milliseconds(1000));
}

TEST_CASE("the clock offset against a server on the same host is about zero") {
  LogCapture log;
  RendezvousServer server(server_options(log));
  RendezvousClient c(client_options(server));
  const ClockOffset o = c.clock_offset(8);
  CHECK(std::chrono::abs(o.steady) < milliseconds(5));
  CHECK(std::chrono::abs(o.system) < milliseconds(5));
  CHECK(o.rtt >= std::chrono::nanoseconds(0));
  CHECK(o.rtt < milliseconds(5));
}

TEST_CASE("a rank that stops heartbeating shows up in dead_ranks after the silence bound") {
  LogCapture log;
  RendezvousServer server(server_options(log));
  RendezvousClient c0(client_options(server));
  RendezvousClient c1(client_options(server));
  std::thread t([&] { c1.join(1, 2, milliseconds(2000)); });
  c0.join(0, 2, milliseconds(2000));
  t.join();
  const milliseconds bound(150);
  CHECK(server.dead_ranks(bound).empty());
  const auto until = Clock::now() + milliseconds(300);
  while (Clock::now() < until) {  // rank 1 beats, rank 0 is silent
    c1.heartbeat();
    std::this_thread::sleep_for(milliseconds(20));
  }
  CHECK(server.dead_ranks(bound) == Ranks{0});
  CHECK(c1.dead_ranks(bound) == Ranks{0});
  c0.heartbeat();
  CHECK(server.dead_ranks(bound).empty());
}

TEST_CASE("heartbeat before join is a usage error") {
  LogCapture log;
  RendezvousServer server(server_options(log));
  RendezvousClient c(client_options(server));
  CHECK_THROWS_AS(c.heartbeat(), std::logic_error);
  CHECK_THROWS_AS(c.barrier("b", milliseconds(10)), std::logic_error);
}

TEST_CASE("a client reconnects after the server closed its idle connection") {
  LogCapture log;
  auto so = server_options(log);
  so.idle_timeout = milliseconds(100);
  RendezvousServer server(so);
  RendezvousClient c(client_options(server));
  c.set("k", "v");
  std::this_thread::sleep_for(milliseconds(300));  // the server drops the idle connection
  CHECK(c.get("k") == to_bytes("v"));
}

TEST_CASE("destroying the server ends a waiting client's call promptly") {
  LogCapture log;
  auto server = std::make_unique<RendezvousServer>(server_options(log));
  RendezvousClient c(client_options(*server));
  std::atomic<bool> failed{false};
  const auto start = Clock::now();
  std::thread t([&] {
    try {
      c.wait("never", milliseconds(10'000));
    } catch (const RendezvousError& e) {
      failed = e.code() == RendezvousErrc::disconnected;
    }
  });
  std::this_thread::sleep_for(milliseconds(100));
  server.reset();
  t.join();
  CHECK(failed);
  CHECK(Clock::now() - start < milliseconds(2000));
}

TEST_CASE("a value larger than the frame limit is refused by the client before sending") {
  LogCapture log;
  RendezvousServer server(server_options(log));
  auto co = client_options(server);
  co.max_frame_bytes = 1024;
  RendezvousClient c(co);
  CHECK_THROWS_AS(c.set("k", std::string(2000, 'x')), std::invalid_argument);
  c.set("k", std::string(900, 'x'));
  CHECK(c.get("k")->size() == 900);
}
