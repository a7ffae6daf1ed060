#include <doctest/doctest.h>

#include <vector>

#include "transport/rendezvous/error.hpp"
#include "transport/rendezvous/store.hpp"

using namespace conveyor::rendezvous;
using Clock = RendezvousStore::Clock;
using std::chrono::milliseconds;
using Ranks = std::vector<std::uint32_t>;

TEST_CASE("the store reports the ranks that have not joined yet") {
  RendezvousStore store;
  const auto t = Clock::now();
  CHECK(store.missing_ranks().empty());
  CHECK(!store.all_joined());
  REQUIRE(store.join(0, 4, t).ok());
  REQUIRE(store.join(2, 4, t).ok());
  CHECK(store.missing_ranks() == Ranks{1, 3});
  CHECK(describe_ranks(store.missing_ranks()) == "rank 1, rank 3");
  REQUIRE(store.join(1, 4, t).ok());
  REQUIRE(store.join(3, 4, t).ok());
  REQUIRE(store.join(3, 4, t).ok());  // a restarted rank joins again
  CHECK(store.all_joined());
}

TEST_CASE("a join with a rank out of range or another world size is rejected") {
  RendezvousStore store;
  const auto t = Clock::now();
  CHECK(store.join(4, 4, t).message() == "rank 4 is out of range for world size 4");
  CHECK(!store.join(0, 0, t).ok());
  REQUIRE(store.join(0, 4, t).ok());
  CHECK(store.join(1, 8, t).message() ==
        "rank 1 was started with world size 8, rank 0 with world size 4; the job cannot start");
  CHECK(store.failure());  // the rendezvous cannot complete: every later join is told why
  CHECK(store.join(1, 4, t).message() ==
        "rank 1 was started with world size 8, rank 0 with world size 4; the job cannot start");
}

TEST_CASE("a barrier completes when every rank arrived and its name can be reused") {
  RendezvousStore store;
  const auto t = Clock::now();
  REQUIRE(store.join(0, 2, t).ok());
  REQUIRE(store.join(1, 2, t).ok());
  std::uint64_t g0 = 0, g1 = 0;
  REQUIRE(store.arrive("b", 0, &g0).ok());
  CHECK(!store.passed("b", g0));
  CHECK(store.barrier_missing("b") == Ranks{1});
  REQUIRE(store.arrive("b", 1, &g1).ok());
  CHECK(g0 == g1);
  CHECK(store.passed("b", g0));
  // the next use of the name is a fresh barrier
  std::uint64_t g2 = 0;
  REQUIRE(store.arrive("b", 0, &g2).ok());
  CHECK(g2 == g0 + 1);
  CHECK(!store.passed("b", g2));
  store.leave("b", 0, g2);  // timed out: withdraws
  CHECK(store.barrier_missing("b") == Ranks{0, 1});
}

TEST_CASE("a barrier or heartbeat from a rank that never joined is rejected") {
  RendezvousStore store;
  std::uint64_t g = 0;
  CHECK(store.arrive("b", 0, &g).message() == "barrier from rank 0 before it joined");
  CHECK(store.heartbeat(1, Clock::now()).message() == "heartbeat from rank 1 before it joined");
}

TEST_CASE("a rank silent for longer than the bound is dead and a heartbeat revives it") {
  RendezvousStore store;
  const auto t0 = Clock::now();
  REQUIRE(store.join(0, 3, t0).ok());
  REQUIRE(store.join(1, 3, t0).ok());
  REQUIRE(store.join(2, 3, t0).ok());
  REQUIRE(store.heartbeat(1, t0 + milliseconds(900)).ok());
  CHECK(store.dead_ranks(milliseconds(500), t0 + milliseconds(1000)) == Ranks{0, 2});
  CHECK(store.dead_ranks(milliseconds(1000), t0 + milliseconds(1000)).empty());
  REQUIRE(store.heartbeat(0, t0 + milliseconds(1000)).ok());
  CHECK(store.dead_ranks(milliseconds(500), t0 + milliseconds(1000)) == Ranks{2});
}

TEST_CASE("values are stored by key") {
  RendezvousStore store;
  CHECK(!store.get("k"));
  CHECK(!store.contains("k"));
  store.set("k", Bytes{1, 2});
  CHECK(store.contains("k"));
  CHECK(store.get("k") == Bytes{1, 2});
  store.set("k", Bytes{});
  CHECK(store.get("k") == Bytes{});
}

TEST_CASE("durations read as seconds when whole and milliseconds otherwise") {
  CHECK(describe_duration(milliseconds(5000)) == "5 s");
  CHECK(describe_duration(milliseconds(250)) == "250 ms");
  CHECK(describe_ranks({}) == "no rank");
}

TEST_CASE("a rank claimed by a second live process fails the rendezvous before the job is complete") {
  RendezvousStore store;
  const auto t = Clock::now();
  const auto alive = [](const std::string&) { return true; };
  REQUIRE(store.join({0, 3, "p0", "A"}, t, alive).ok());
  REQUIRE(store.join({1, 3, "p1", "B"}, t, alive).ok());
  REQUIRE(store.join({1, 3, "p1", "B"}, t, alive).ok());  // its own second connection
  const std::string twice = "rank 1 joined twice: first from B, again from C; the job cannot start";
  CHECK(store.join({1, 3, "p2", "C"}, t, alive).message() == twice);
  CHECK(store.failure() == twice);
  CHECK(store.join({2, 3, "p3", "D"}, t, alive).message() == twice);  // too late for anyone
}

TEST_CASE("once every rank joined, a second live process is refused alone and a dead one's successor accepted") {
  RendezvousStore store;
  const auto t = Clock::now();
  bool first_alive = true;
  const auto alive = [&](const std::string& p) { return p != "p1" || first_alive; };
  REQUIRE(store.join({0, 2, "p0", "A"}, t, alive).ok());
  REQUIRE(store.join({1, 2, "p1", "B"}, t, alive).ok());
  CHECK(store.join({1, 2, "p2", "C"}, t, alive).message() ==
        "rank 1 joined twice: first from B, again from C; refused: the job goes on without it");
  CHECK(store.join({0, 4, "p3", "D"}, t, alive).message() ==
        "rank 0 was started with world size 2 and again with world size 4; refused: the job goes "
        "on without it");
  CHECK(store.join({1, 3, "p3", "D"}, t, alive).message() ==
        "rank 1 was started with world size 3, rank 0 with world size 2; refused: the job goes on "
        "without it");
  CHECK_FALSE(store.failure());
  first_alive = false;  // p1's connections closed
  CHECK(store.join({1, 2, "p2", "C"}, t, alive).ok());
  // Reported dead counts as gone even while the connection looks open.
  first_alive = true;
  CHECK(store.report_dead_ranks(milliseconds(10), t + milliseconds(50)) == Ranks{0, 1});
  CHECK(store.join({1, 2, "p4", "E"}, t + milliseconds(50), alive).ok());
}
