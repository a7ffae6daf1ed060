// Ranks started with different world sizes: the rendezvous cannot complete, so every
// rank waiting in it (node 0's included) fails at once naming both sizes, instead of
// waiting out its timeout for ranks that will never come. A stray process with the wrong
// world size that arrives once the job is complete is refused alone.
#include <doctest/doctest.h>

#include <future>
#include <string>

#include "tests/transport/rendezvous/test_server.hpp"

using namespace conveyor;
using conveyor::testing::LogCapture;
using conveyor::testing::client_options;
using conveyor::testing::server_options;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

std::string join_error(RendezvousClient& c, std::uint32_t rank, std::uint32_t world,
                       milliseconds timeout) {
  try {
    c.join(rank, world, timeout);
  } catch (const RendezvousError& e) {
    return e.what();
  }
  return "joined";
}

}  // namespace

TEST_CASE("a rank started with another world size than rank 0 fails every waiting rank at once naming both sizes") {
  LogCapture log;
  RendezvousServer server(server_options(log));
  RendezvousClient node0(client_options(server));
  RendezvousClient node1(client_options(server));
  const auto start = Clock::now();
  auto parked = std::async(std::launch::async, [&] { return join_error(node0, 0, 2, milliseconds(5000)); });
  std::this_thread::sleep_for(milliseconds(100));  // node 0 waits in its join (either order fails)
  const std::string joiner = join_error(node1, 1, 3, milliseconds(5000));
  const std::string waiting = parked.get();
  const std::string expected =
      "rendezvous: rank 1 was started with world size 3, rank 0 with world size 2; the job cannot start";
  CHECK(joiner == expected);
  CHECK(waiting == expected);
  CHECK(Clock::now() - start < milliseconds(2000));  // not the 5 s join timeout
  CHECK(log.eventually_contains("rank 1 was started with world size 3, rank 0 with world size 2"));
}

TEST_CASE("rank 0 arriving after a rank with another world size fails both, naming rank 0's size as the job's") {
  LogCapture log;
  RendezvousServer server(server_options(log));
  RendezvousClient node0(client_options(server));
  RendezvousClient node2(client_options(server));
  auto parked = std::async(std::launch::async, [&] { return join_error(node2, 2, 3, milliseconds(5000)); });
  std::this_thread::sleep_for(milliseconds(100));
  const std::string expected =
      "rendezvous: rank 2 was started with world size 3, rank 0 with world size 2; the job cannot start";
  CHECK(join_error(node0, 0, 2, milliseconds(5000)) == expected);
  CHECK(parked.get() == expected);
}

TEST_CASE("a rank with another world size arriving at a complete job is refused alone and the job goes on") {
  LogCapture log;
  RendezvousServer server(server_options(log));
  RendezvousClient node0(client_options(server));
  RendezvousClient node1(client_options(server));
  auto other = std::async(std::launch::async, [&] { return join_error(node1, 1, 2, milliseconds(5000)); });
  CHECK(join_error(node0, 0, 2, milliseconds(5000)) == "joined");
  CHECK(other.get() == "joined");
  RendezvousClient stray(client_options(server));
  CHECK(join_error(stray, 1, 4, milliseconds(5000)) ==
        "rendezvous: rank 1 was started with world size 4, rank 0 with world size 2; refused: the job "
        "goes on without it");
  CHECK(log.eventually_contains("refused"));
  // The job is intact: both of its ranks still pass a barrier.
  auto barrier = std::async(std::launch::async, [&] { node1.barrier("after", milliseconds(2000)); });
  node0.barrier("after", milliseconds(2000));
  barrier.get();
}

TEST_CASE("a process waiting for a key learns the world-size failure at once, and the answer reaches it before the server stops") {
  LogCapture log;
  std::string waited;
  {
    RendezvousServer server(server_options(log));
    RendezvousClient node1(client_options(server));
    RendezvousClient node0(client_options(server));
    RendezvousClient waiter(client_options(server));
    const auto start = Clock::now();
    auto key = std::async(std::launch::async, [&] {
      try {
        waiter.wait("never-set", milliseconds(5000));
      } catch (const RendezvousError& e) {
        return std::string(e.what());
      }
      return std::string("set");
    });
    auto parked = std::async(std::launch::async, [&] { return join_error(node1, 1, 3, milliseconds(5000)); });
    std::this_thread::sleep_for(milliseconds(100));
    CHECK(join_error(node0, 0, 2, milliseconds(5000)) ==
          "rendezvous: rank 1 was started with world size 3, rank 0 with world size 2; the job cannot start");
    waited = key.get();
    CHECK(parked.get().find("the job cannot start") != std::string::npos);
    CHECK(Clock::now() - start < milliseconds(2000));  // not the 5 s timeouts
  }
  const std::string expected = "rank 1 was started with world size 3, rank 0 with world size 2; the job cannot start";
  CHECK(waited.find(expected) != std::string::npos);
}
