// The project's rendezvous store as Gloo's store: keys under a group's prefix, bounded
// waits that name the missing keys, a clear error for a key that is not set.
#include <doctest/doctest.h>

#include "tests/transport/collective/collective_test_support.hpp"
#include "transport/collective/collective_error.hpp"
#include "transport/collective/gloo/gloo_rendezvous_store.hpp"

namespace conveyor {
namespace {

using namespace collective_testing;
using namespace std::chrono_literals;

std::vector<char> chars(const std::string& s) { return {s.begin(), s.end()}; }

TEST_CASE("two groups' gloo keys live under their own prefixes in one store") {
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  RendezvousClient client(testing::client_options(server));
  GlooRendezvousStore a(client, "collective/stage 0/0/gloo/", 1000ms);
  GlooRendezvousStore b(client, "collective/stage 1/0/gloo/", 1000ms);
  a.set("0", chars("address of stage 0 rank 0"));
  b.set("0", chars("address of stage 1 rank 0"));
  a.wait({"0"});
  CHECK(a.get("0") == chars("address of stage 0 rank 0"));
  CHECK(b.get("0") == chars("address of stage 1 rank 0"));
  CHECK(rendezvous::to_text(*client.get("collective/stage 1/0/gloo/0")) ==
        "address of stage 1 rank 0");
  CHECK(!client.get("0"));  // nothing outside the prefixes
}

TEST_CASE("a gloo store wait returns once a peer sets the key, and names the keys still missing at its timeout") {
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  RendezvousClient client(testing::client_options(server));
  GlooRendezvousStore store(client, "g/", 5000ms);
  std::thread peer([&] {  // the same client, as ranks of one process may share it
    std::this_thread::sleep_for(100ms);
    store.set("1", chars("late"));
  });
  store.wait({"1"}, 3000ms);
  peer.join();
  CHECK(store.get("1") == chars("late"));

  const auto start = Clock::now();
  const std::string error = error_of([&] { store.wait({"1", "2", "3"}, 300ms); });
  CHECK(seconds_since(start) >= 0.29);
  CHECK(seconds_since(start) < 2.0);
  CHECK(error == "collective: gloo store: 'g/2', 'g/3' not set within 300 ms");
  CHECK_THROWS_AS(store.wait({"4"}, 10ms), CollectiveTimeout);
}

TEST_CASE("a gloo store get waits for its key like gloo's own stores, bounded by the default timeout") {
  testing::LogCapture log;
  RendezvousServer server(testing::server_options(log));
  RendezvousClient client(testing::client_options(server));
  GlooRendezvousStore store(client, "g/", 400ms);
  std::thread peer([&] {
    std::this_thread::sleep_for(100ms);
    store.set("rank_1", chars("h1"));
  });
  CHECK(store.get("rank_1") == chars("h1"));  // set after get began
  peer.join();
  const auto start = Clock::now();
  CHECK(error_of([&] { store.get("7"); }) == "collective: gloo store: 'g/7' not set within 400 ms");
  CHECK(seconds_since(start) >= 0.39);
}

}  // namespace
}  // namespace conveyor
