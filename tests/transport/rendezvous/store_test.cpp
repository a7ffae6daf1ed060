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

TEST_CASE("a change a standby must have gets the next seq, a heartbeat or a barrier does not") {
  RendezvousStore store;
  const auto t = Clock::now();
  CHECK(store.seq() == 0);
  REQUIRE(store.join({0, 2, "p0", "A"}, t, nullptr).ok());
  CHECK(store.seq() == 1);
  REQUIRE(store.join({0, 2, "p0", "A"}, t, nullptr).ok());  // the same process again: no change
  CHECK(store.seq() == 1);
  REQUIRE(store.join({1, 2, "p1", "B"}, t, nullptr).ok());
  store.set("k", Bytes{1});
  CHECK(store.seq() == 3);
  REQUIRE(store.heartbeat(1, t).ok());
  std::uint64_t g = 0;
  REQUIRE(store.arrive("b", 0, &g).ok());
  CHECK(store.seq() == 3);
  store.set("k", Bytes{2});
  CHECK(store.seq() == 4);
}

TEST_CASE("changes since a seq hold the values set after it in order, and every joined rank") {
  RendezvousStore store;
  const auto t = Clock::now();
  REQUIRE(store.join({1, 2, "p1", "B"}, t, nullptr).ok());
  store.set("b", Bytes{1});
  store.set("a", Bytes{2});
  store.set("b", Bytes{3});  // "b" now comes after "a"
  const ChangesReply all = store.changes_since(0, kDefaultMaxFrameBytes);
  CHECK(all.seq == 4);
  CHECK(all.world_size == 2);
  CHECK(all.joined == std::vector<JoinedRank>{{1, "p1", "B"}});
  CHECK(all.values == std::vector<ChangedValue>{{"a", {2}}, {"b", {3}}});
  const ChangesReply later = store.changes_since(3, kDefaultMaxFrameBytes);
  CHECK(later.values == std::vector<ChangedValue>{{"b", {3}}});
  CHECK(later.joined.size() == 1);  // ranks always come whole
  CHECK(store.changes_since(4, kDefaultMaxFrameBytes).values.empty());
}

TEST_CASE("changes too large for one frame come in parts, each within the limit") {
  RendezvousStore store;
  for (int i = 0; i < 5; ++i) store.set("key" + std::to_string(i), Bytes(100, std::uint8_t(i)));
  const std::size_t limit = changes_frame_length({}) + 2 * changed_value_bytes("key0", Bytes(100));
  std::int64_t since = 0;
  std::vector<std::string> keys;
  for (int part = 0; part < 3; ++part) {
    const ChangesReply c = store.changes_since(since, limit);
    CHECK(changes_frame_length(c) <= limit);
    for (const auto& v : c.values) keys.push_back(v.key);
    since = c.seq;
  }
  CHECK(since == 5);
  CHECK(keys == std::vector<std::string>{"key0", "key1", "key2", "key3", "key4"});
  // A value larger than the limit still goes, alone: the mirror must not stall on it.
  CHECK(store.changes_since(0, 10).values.size() == 1);
}

TEST_CASE("a follower adopts changes, then once promoted counts every rank as seen then") {
  RendezvousStore primary;
  const auto t0 = Clock::now();
  REQUIRE(primary.join({0, 2, "p0", "A"}, t0, nullptr).ok());
  REQUIRE(primary.join({1, 2, "p1", "B"}, t0, nullptr).ok());
  primary.set("lost/1", Bytes{'1'});
  RendezvousStore follower(/*follower=*/true);
  CHECK(follower.following());
  REQUIRE(follower.adopt(primary.changes_since(0, kDefaultMaxFrameBytes), t0).ok());
  CHECK(follower.all_joined());
  CHECK(follower.get("lost/1") == Bytes{'1'});
  CHECK(follower.seq() > 0);
  // A world size other than the mirrored one is refused, and changes nothing.
  ChangesReply other = primary.changes_since(0, kDefaultMaxFrameBytes);
  other.world_size = 3;
  other.values = {{"x", {}}};
  CHECK(follower.adopt(other, t0).message() ==
        "the primary's world size is 3, but 2 was mirrored before");
  CHECK(!follower.contains("x"));

  const auto t1 = t0 + std::chrono::seconds(60);  // the primary's heartbeats were never mirrored
  follower.promote(t1);
  CHECK(!follower.following());
  CHECK(follower.dead_ranks(milliseconds(500), t1 + milliseconds(400)).empty());
  REQUIRE(follower.heartbeat(1, t1 + milliseconds(900)).ok());
  CHECK(follower.dead_ranks(milliseconds(500), t1 + milliseconds(1000)) == Ranks{0});
  CHECK(follower.join({1, 2, "p1", "B"}, t1, nullptr).ok());  // a known rank, the same process
  CHECK(follower.adopt(primary.changes_since(0, kDefaultMaxFrameBytes), t1).message() ==
        "this store serves as a primary (promoted, or never a follower): it takes no changes from "
        "another");
}
