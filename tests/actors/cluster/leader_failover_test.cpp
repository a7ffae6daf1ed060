// The election after node 0's loss, over real stores on loopback (leader_failover.hpp):
// node 1, the standby, mirrors the store and promotes its copy; node 2 moves its clients
// there through their shared route. Bounds are generous: these run on loaded machines.
#include "actors/cluster/leader_failover.hpp"

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <thread>

#include "tests/transport/rendezvous/test_server.hpp"

using namespace conveyor;
using conveyor::testing::client_options;
using conveyor::testing::LogCapture;
using conveyor::testing::server_options;
using rendezvous::StoreRoute;
using std::chrono::milliseconds;

namespace {

LeaderFailoverOptions failover_options(int node, const RendezvousServer& primary, LogCapture& log) {
  LeaderFailoverOptions o;
  o.node = node;
  o.advertise_host = "127.0.0.1";
  o.store = client_options(primary);
  o.store.route = std::make_shared<StoreRoute>("127.0.0.1", primary.port());
  o.reach_timeout = milliseconds(5000);
  o.refresh_every = milliseconds(0);
  o.log = log.sink();
  return o;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE(
    "node 0 lost: node 1, the standby, promotes its copy of the store, and node 2 moves its "
    "clients there") {
  LogCapture log;
  auto primary = std::make_unique<RendezvousServer>(server_options(log));
  const auto o1 = failover_options(1, *primary, log), o2 = failover_options(2, *primary, log);
  RendezvousClient c1(o1.store), c2(o2.store);
  LeaderFailover node1(o1, c1), node2(o2, c2);
  node1.on_layout({0, 1, 2}, 0);
  node2.on_layout({0, 1, 2}, 0);
  node2.refresh();
  c2.set("before", "the loss");
  std::this_thread::sleep_for(milliseconds(1000));  // the mirror's poll is 500 ms
  primary.reset();
  std::string led;
  std::thread successor(
      [&] { led = node1.fail_over("seen", "copies of stage(s) [0] up to step 5"); });
  const auto followed = node2.fail_over("seen", "");
  successor.join();
  INFO(led << "\n" << followed << "\n" << log.all());
  CHECK(contains(led,
                 "node 0 was lost; node 1 was elected to lead (term 1): it promoted its copy of "
                 "the store (seq "));
  CHECK(contains(
      led,
      "node(s) [2] follow it, and it holds copies of stage(s) [0] up to step 5, but taking over"));
  CHECK(contains(led, "the job ends (seen)"));
  CHECK(
      contains(followed,
               "node 0 was lost; node 1 was elected to lead (term 1): this node follows node 1 and "
               "reached its promoted store at 127.0.0.1:"));
  // Node 2's own client moved with the route: it reads what node 0's store held.
  CHECK(rendezvous::to_text(*c2.get("before")) == "the loss");
}

TEST_CASE(
    "a node that never learnt where the standby's copy listens says so, and the leader alone "
    "elects no one") {
  LogCapture log;
  auto primary = std::make_unique<RendezvousServer>(server_options(log));
  const auto o2 = failover_options(2, *primary, log);
  RendezvousClient c2(o2.store);
  LeaderFailover node2(o2, c2);
  node2.on_layout({0, 1, 2}, 0);
  node2.refresh();  // node 1 published nothing
  primary.reset();
  CHECK(contains(node2.fail_over("seen", ""),
                 "node 1 was elected to lead (term 1), but this node never learnt where "
                 "its copy of the store listens: the job ends (seen)"));
  node2.on_layout({0}, 1);  // as a layout node 0 alone runs
  CHECK(contains(node2.fail_over("seen", ""),
                 "no node can be elected to lead: node 0 led the job alone"));
}
