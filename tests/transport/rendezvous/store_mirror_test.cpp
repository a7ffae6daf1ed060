// A standby's follower server mirroring a primary (store_mirror.hpp), and what it serves
// once the primary is gone and it is promoted. Bounds are generous: these run on loaded
// machines, and no check depends on how fast a change travels.
#include "transport/rendezvous/store_mirror.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/transport/rendezvous/test_server.hpp"

using namespace conveyor;
using conveyor::testing::client_options;
using conveyor::testing::error_of;
using conveyor::testing::LogCapture;
using conveyor::testing::run_ranks;
using conveyor::testing::server_options;
using rendezvous::ChangesReply;
using rendezvous::StoreRoute;
using rendezvous::to_text;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using Ranks = std::vector<std::uint32_t>;

namespace {

constexpr milliseconds kPatience{10'000};  // far beyond any expected delay

RendezvousServerOptions follower_options(LogCapture& log) {
  auto o = server_options(log);
  o.follower = true;
  return o;
}

StoreMirrorOptions mirror_options(const RendezvousServer& primary, LogCapture& log) {
  StoreMirrorOptions o;
  o.primary = client_options(primary);
  o.poll = milliseconds(200);
  o.log = log.sink();
  return o;
}

// Everything the follower holds, read as its own followers would.
ChangesReply held_by(const RendezvousServer& follower) {
  RendezvousClient reader(client_options(follower));
  return reader.follow(0, milliseconds(0));
}

bool holds_key(const ChangesReply& c, const std::string& key, const std::string& text) {
  return std::ranges::any_of(
      c.values, [&](const auto& v) { return v.key == key && to_text(v.value) == text; });
}

// Polls until pred() holds or kPatience passes.
template <class Pred>
bool eventually(Pred pred) {
  const auto deadline = Clock::now() + kPatience;
  while (!pred()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

// Two processes, ranks 0 and 1, joined through one shared route.
RendezvousClientOptions rank_options(const RendezvousServer& server,
                                     std::shared_ptr<StoreRoute> route, std::uint32_t rank) {
  auto o = client_options(server);
  o.route = std::move(route);
  o.process = "process-" + std::to_string(rank);
  o.origin = "node " + std::to_string(rank);
  return o;
}

}  // namespace

TEST_CASE("sets and joins on a primary appear on its follower") {
  LogCapture log;
  RendezvousServer primary(server_options(log));
  RendezvousServer follower(follower_options(log));
  StoreMirror mirror(follower, mirror_options(primary, log));

  run_ranks(2, [&](std::uint32_t rank) {
    RendezvousClient c(client_options(primary));
    c.join(rank, 2, kPatience);
  });
  RendezvousClient writer(client_options(primary));
  writer.set("caf/0", "10.0.0.1:4000");
  CHECK(eventually([&] { return holds_key(held_by(follower), "caf/0", "10.0.0.1:4000"); }));
  const auto first = Clock::now();
  writer.set("lost/1", "1");
  writer.set("caf/0", "10.0.0.1:4001");  // a new value replaces the mirrored one
  CHECK(eventually([&] { return holds_key(held_by(follower), "caf/0", "10.0.0.1:4001"); }));
  MESSAGE("a change reached the follower after ",
          std::chrono::duration_cast<milliseconds>(Clock::now() - first).count(), " ms");

  const ChangesReply held = held_by(follower);
  CHECK(held.world_size == 2);
  REQUIRE(held.joined.size() == 2);
  CHECK(held.joined[0].rank == 0);
  CHECK(held.joined[1].rank == 1);
  CHECK(holds_key(held, "lost/1", "1"));
  CHECK(mirror.seq() > 0);
  CHECK(mirror.last_error().empty());
  CHECK(follower.following());
}

TEST_CASE("once the primary is gone, the promoted follower serves clients re-pointed at it") {
  LogCapture log;
  auto primary = std::make_unique<RendezvousServer>(server_options(log));
  RendezvousServer follower(follower_options(log));
  StoreMirror mirror(follower, mirror_options(*primary, log));
  auto route = std::make_shared<StoreRoute>("127.0.0.1", primary->port());

  std::unique_ptr<RendezvousClient> rank0, rank1;
  run_ranks(2, [&](std::uint32_t rank) {
    auto c = std::make_unique<RendezvousClient>(rank_options(*primary, route, rank));
    c->join(rank, 2, kPatience);
    (rank == 0 ? rank0 : rank1) = std::move(c);
  });
  rank0->set("epoch", "3");
  REQUIRE(eventually([&] { return holds_key(held_by(follower), "epoch", "3"); }));

  // Node 0's host is lost: its server and its rank go together.
  rank0.reset();
  primary.reset();
  mirror.stop();
  follower.promote();
  const auto promoted = Clock::now();
  CHECK(!follower.following());
  route->move_to("127.0.0.1", follower.port());

  CHECK(to_text(*rank1->get("epoch")) == "3");
  CHECK(to_text(rank1->wait("epoch", milliseconds(1000))) == "3");
  rank1->heartbeat();
  rank1->set("epoch", "4");
  RendezvousClient newcomer(rank_options(follower, route, 1));  // connects through the route
  CHECK(to_text(newcomer.wait("epoch", milliseconds(1000))) == "4");
  // Rank 1 is known here, and so is rank 0: a join waits for no one. (Were the ranks not
  // mirrored, it would wait for rank 0 and time out.)
  newcomer.join(1, 2, milliseconds(2000));

  // Silence restarts at the promotion: rank 0 is not silent at once, but is once the bound
  // passed, while rank 1 keeps heartbeating.
  const milliseconds silence(3000);
  const Ranks dead_at_once = follower.dead_ranks(silence);
  if (Clock::now() - promoted < silence) CHECK(dead_at_once.empty());
  Ranks dead;
  CHECK(eventually([&] {
    rank1->heartbeat();
    dead = rank1->dead_ranks(silence);
    return !dead.empty();
  }));
  CHECK(dead == Ranks{0});
  CHECK(Clock::now() - promoted > silence);
}

TEST_CASE("a standby serves nothing but follow until it is promoted") {
  LogCapture log;
  RendezvousServer follower(follower_options(log));  // io_timeout 300 ms
  RendezvousClient early(client_options(follower));
  const std::string refused = error_of([&] { early.get("k"); });
  CHECK(refused.find("is a standby rendezvous server and was not promoted within 300 ms") !=
        std::string::npos);

  // A request that comes just before the promotion waits for it and is served.
  auto o = server_options(log);
  o.follower = true;
  o.io_timeout = kPatience;
  RendezvousServer patient(o);
  RendezvousClientOptions co = client_options(patient);
  co.io_timeout = kPatience;
  RendezvousClient waiting(co);
  std::thread promote([&] {
    std::this_thread::sleep_for(milliseconds(100));
    patient.promote();
  });
  CHECK(!waiting.get("k"));
  promote.join();
  waiting.set("k", "v");
  CHECK(to_text(*waiting.get("k")) == "v");
}

TEST_CASE("a mirror whose primary is gone says so once and stops promptly") {
  LogCapture log;
  auto primary = std::make_unique<RendezvousServer>(server_options(log));
  RendezvousServer follower(follower_options(log));
  auto mirror = std::make_unique<StoreMirror>(follower, mirror_options(*primary, log));
  RendezvousClient(client_options(*primary)).set("k", "v");
  REQUIRE(eventually([&] { return mirror->seq() == 1; }));
  primary.reset();
  CHECK(log.eventually_contains("rendezvous mirror: lost the primary at seq 1", kPatience));
  const auto start = Clock::now();
  mirror.reset();  // the destructor stops it
  CHECK(Clock::now() - start < kPatience);
  CHECK(follower.following());
}
