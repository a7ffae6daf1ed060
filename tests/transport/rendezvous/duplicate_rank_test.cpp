// Two processes claiming one rank (RendezvousClientOptions::process plays the processes).
// Before the job is complete the rendezvous fails for everyone, naming the rank and both
// addresses; once it is complete the newcomer alone is refused and the job goes on. A
// rank whose first process is gone (its connections closed, or reported dead) is that
// rank's replacement, not a duplicate.
#include <doctest/doctest.h>

#include <future>
#include <string>

#include "tests/transport/rendezvous/test_server.hpp"

using namespace conveyor;
using conveyor::testing::LogCapture;
using conveyor::testing::server_options;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

RendezvousClientOptions process_options(const RendezvousServer& server, const std::string& name) {
  auto o = conveyor::testing::client_options(server);
  o.process = "id-of-" + name;
  o.origin = name;
  return o;
}

std::string join_error(RendezvousClient& c, std::uint32_t rank, std::uint32_t world,
                       milliseconds timeout = milliseconds(5000)) {
  try {
    c.join(rank, world, timeout);
  } catch (const RendezvousError& e) {
    return e.what();
  }
  return "joined";
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A job of two ranks: both join (rank 1 on a thread of its own, as joins wait for all).
void join_two(RendezvousClient& node0, RendezvousClient& node1) {
  auto joined = std::async(std::launch::async, [&] { return join_error(node1, 1, 2); });
  REQUIRE(join_error(node0, 0, 2) == "joined");
  REQUIRE(joined.get() == "joined");
}

}  // namespace

TEST_CASE("a second live process with a rank before every rank joined fails every waiting rank at once, naming both") {
  LogCapture log;
  RendezvousServer server(server_options(log));
  RendezvousClient node0(process_options(server, "node 0"));
  RendezvousClient first(process_options(server, "first node 1"));
  RendezvousClient second(process_options(server, "second node 1"));
  const auto start = Clock::now();
  auto n0 = std::async(std::launch::async, [&] { return join_error(node0, 0, 3); });
  auto n1 = std::async(std::launch::async, [&] { return join_error(first, 1, 3); });
  std::this_thread::sleep_for(milliseconds(100));  // both wait for rank 2 (the order is not needed)
  const std::string e = join_error(second, 1, 3);
  INFO(e);
  CHECK(has(e, "rendezvous: rank 1 joined twice: first from 127.0.0.1:"));
  CHECK(has(e, ", again from 127.0.0.1:"));
  CHECK(has(e, " (first node 1)"));
  CHECK(has(e, " (second node 1)"));
  CHECK(e.ends_with("; the job cannot start"));
  CHECK(n0.get() == e);
  CHECK(n1.get() == e);
  CHECK(Clock::now() - start < milliseconds(2000));
  CHECK(log.eventually_contains("rank 1 joined twice"));
}

TEST_CASE("a second live process with a rank of a complete job is refused alone and the job goes on") {
  LogCapture log;
  RendezvousServer server(server_options(log));
  RendezvousClient node0(process_options(server, "node 0"));
  RendezvousClient node1(process_options(server, "node 1"));
  join_two(node0, node1);
  RendezvousClient stray(process_options(server, "stray"));
  const std::string e = join_error(stray, 1, 2);
  CHECK(has(e, "rendezvous: rank 1 joined twice: first from 127.0.0.1:"));
  CHECK(has(e, " (stray); refused: the job goes on without it"));
  CHECK(log.eventually_contains("(stray); refused: the job goes on without it"));
  auto barrier = std::async(std::launch::async, [&] { node1.barrier("after", milliseconds(2000)); });
  node0.barrier("after", milliseconds(2000));
  barrier.get();
}

TEST_CASE("a process replacing one whose connections closed takes its rank") {
  LogCapture log;
  RendezvousServer server(server_options(log));
  RendezvousClient node0(process_options(server, "node 0"));
  auto lost = std::make_unique<RendezvousClient>(process_options(server, "lost node 1"));
  join_two(node0, *lost);
  lost.reset();  // the process ended: its connection closed
  RendezvousClient replacement(process_options(server, "replacement node 1"));
  CHECK(join_error(replacement, 1, 2) == "joined");
}

TEST_CASE("a process replacing one reported dead takes its rank though the dead one's connection is still open") {
  LogCapture log;
  RendezvousServer server(server_options(log));
  RendezvousClient node0(process_options(server, "node 0"));
  RendezvousClient frozen(process_options(server, "frozen node 1"));
  join_two(node0, frozen);
  RendezvousClient early(process_options(server, "early node 1"));
  CHECK(has(join_error(early, 1, 2), "rank 1 joined twice"));  // not yet reported dead
  std::this_thread::sleep_for(milliseconds(60));
  node0.heartbeat();
  CHECK(node0.dead_ranks(milliseconds(50)) == std::vector<std::uint32_t>{1});
  RendezvousClient replacement(process_options(server, "replacement node 1"));
  CHECK(join_error(replacement, 1, 2) == "joined");
}

TEST_CASE("one process joining a rank again on a second connection is no duplicate") {
  LogCapture log;
  RendezvousServer server(server_options(log));
  RendezvousClient node0(process_options(server, "node 0"));
  RendezvousClient node1(process_options(server, "node 1"));
  join_two(node0, node1);
  RendezvousClient watch(process_options(server, "node 1"));  // as its LivenessWatch does
  CHECK(join_error(watch, 1, 2) == "joined");
}
