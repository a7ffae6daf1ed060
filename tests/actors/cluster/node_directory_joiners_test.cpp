// Node 0's directory when two nodes join a shrunk job before either is taken in
// (issue 44's grow, node_directory.cpp: rejoin). Each joiner dials only the layout's nodes
// and may have found the other's forerunner's stale address in the store, so the directory
// must connect them to each other: the earlier joiner hears of the later (PeerRejoined, as
// every node does), and the later of every earlier one still waiting, before the
// coordinator hears of the later join. In one process: the other nodes' directories and
// the coordinator are stand-ins that record what they receive.
#include <doctest/doctest.h>

#include <caf/all.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "actors/cluster/node_directory.hpp"

using namespace conveyor;

namespace {

// What the stand-ins received, in order, across actors.
struct Record {
  std::mutex mutex;
  std::vector<std::string> lines;
  void add(std::string line) {
    std::lock_guard lock(mutex);
    lines.push_back(std::move(line));
  }
  // The lines once there are `n` (the coordinator hears of a join after the joiner's
  // answer was sent), or what there is after 10 s.
  std::vector<std::string> all(std::size_t n) {
    for (int i = 0; i < 1000; ++i) {
      {
        std::lock_guard lock(mutex);
        if (lines.size() >= n) return lines;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::lock_guard lock(mutex);
    return lines;
  }
};

// A joiner's directory: connects to every peer it is told of.
caf::behavior joiner_directory(caf::event_based_actor*, int node, std::shared_ptr<Record> record) {
  return {[=](const PeerRejoined& peer) {
    record->add(fmt::format("node {} connects to node {} at {}", node, peer.node, peer.ucx_address.at(0)));
    return true;
  }};
}

// The coordinator: records the joins it hears of.
caf::behavior coordinator(caf::event_based_actor*, std::shared_ptr<Record> record) {
  return {[=](node_joined_atom, const NodeStages& stages) {
    record->add(fmt::format("coordinator hears node {} joined", stages.node));
  }};
}

// Ends node 0's directory however the test leaves (a failed REQUIRE too): it holds the
// stand-ins, and the actor system's destructor waits for every actor.
struct EndOnExit {
  caf::actor actor;
  ~EndOnExit() { caf::anon_send_exit(actor, caf::exit_reason::user_shutdown); }
};

NodeStages joiner(int node, caf::actor directory) {
  // The worker address is one byte: the node's rank plus 100, to tell whose it is.
  return NodeStages{node, {node}, {}, std::move(directory), {static_cast<std::uint8_t>(100 + node)}};
}

}  // namespace

TEST_CASE("two nodes that join a shrunk job before either is taken in are connected to each other before the coordinator hears of the second") {
  caf::actor_system_config cfg;
  caf::actor_system system(cfg);
  auto record = std::make_shared<Record>();
  std::vector<std::pair<int, std::uint8_t>> node0_reconnects;
  std::mutex node0_mutex;
  Reconnect reconnect = [&](int node, const std::vector<std::uint8_t>& address) {
    std::lock_guard lock(node0_mutex);
    node0_reconnects.emplace_back(node, address.at(0));
  };
  // Node 0 alone runs the job's one rank after a shrink (the Relayout below), as in
  // two_joiners_test.cpp.
  RelayoutLocal relayout_local = [](const Relayout&) { return NodeStages{0, {0}, {StageActor{}}, {}, {}}; };
  auto directory = system.spawn(node_directory, 3, NodeStages{0, {0, 1, 2}, {StageActor{}, StageActor{}, StageActor{}}, {}, {}},
                                reconnect, RespawnLocal{}, RebuildEdges{}, PeerStop{}, nullptr, relayout_local,
                                std::string{}, PublishLayoutNodes{});
  EndOnExit end{directory};
  caf::scoped_actor self(system);
  self->send(directory, coordinator_atom::value,
             caf::actor_cast<CoordinatorActor>(system.spawn(coordinator, record)));
  bool moved = false;
  self->request(directory, caf::infinite, Relayout{1, {0}, 0, true})
      .receive([&](const LayoutActors& all) { moved = all.stages.size() == 1; },
               [&](caf::error& e) { FAIL(system.render(e)); });
  REQUIRE(moved);

  auto d1 = system.spawn(joiner_directory, 1, record);
  auto d2 = system.spawn(joiner_directory, 2, record);
  for (auto& [stages, name] : {std::pair{joiner(1, d1), "node 1"}, std::pair{joiner(2, d2), "node 2"}}) {
    bool taken = false;
    self->request(directory, caf::infinite, stages)
        .receive([&](bool ok) { taken = ok; }, [&](caf::error& e) { FAIL(name << ": " << system.render(e)); });
    CHECK_MESSAGE(taken, name << "'s join was not answered true");
  }
  // Both answered: every PeerRejoined was answered before the coordinator heard of node
  // 2's join (the two joiners' directories answer in either order).
  const auto lines = record->all(4);
  INFO(fmt::format("{}", fmt::join(lines, "\n")));
  REQUIRE(lines.size() == 4);
  CHECK(lines.back() == "coordinator hears node 2 joined");
  for (const char* line : {"coordinator hears node 1 joined", "node 1 connects to node 2 at 102",
                           "node 2 connects to node 1 at 101"})
    CHECK_MESSAGE(std::count(lines.begin(), lines.end() - 1, line) == 1, line);
  std::lock_guard lock(node0_mutex);
  CHECK(node0_reconnects == std::vector<std::pair<int, std::uint8_t>>{{1, 101}, {2, 102}});
}

TEST_CASE("a node that joins after an earlier joiner was taken in is not told of it again") {
  caf::actor_system_config cfg;
  caf::actor_system system(cfg);
  auto record = std::make_shared<Record>();
  Reconnect reconnect = [](int, const std::vector<std::uint8_t>&) {};
  // The moves: node 0 alone, then nodes 0 and 1 (node 1 taken in), each spawning node 0's
  // rank 0; node 1's directory answers the forwarded Relayout with its rank 1.
  RelayoutLocal relayout_local = [](const Relayout&) { return NodeStages{0, {0}, {StageActor{}}, {}, {}}; };
  auto directory = system.spawn(node_directory, 3, NodeStages{0, {0, 1, 2}, {StageActor{}, StageActor{}, StageActor{}}, {}, {}},
                                reconnect, RespawnLocal{}, RebuildEdges{}, PeerStop{}, nullptr, relayout_local,
                                std::string{}, PublishLayoutNodes{});
  EndOnExit end{directory};
  caf::scoped_actor self(system);
  self->send(directory, coordinator_atom::value,
             caf::actor_cast<CoordinatorActor>(system.spawn(coordinator, record)));
  const auto move = [&](Relayout r) {
    bool ok = false;
    self->request(directory, caf::infinite, r)
        .receive([&](const LayoutActors&) { ok = true; }, [&](caf::error& e) { FAIL(system.render(e)); });
    REQUIRE(ok);
  };
  move(Relayout{1, {0}, 0, true});
  auto d1 = system.spawn([record](caf::event_based_actor*) -> caf::behavior {
    return {[=](const PeerRejoined& peer) {
              record->add(fmt::format("node 1 connects to node {}", peer.node));
              return true;
            },
            [](const Relayout&) { return NodeStages{1, {1}, {StageActor{}}, {}, {}}; }};
  });
  auto d2 = system.spawn(joiner_directory, 2, record);
  const auto join = [&](NodeStages stages) {
    bool taken = false;
    self->request(directory, caf::infinite, stages)
        .receive([&](bool ok) { taken = ok; }, [&](caf::error& e) { FAIL(system.render(e)); });
    CHECK(taken);
  };
  join(joiner(1, d1));
  move(Relayout{2, {0, 1}, 0, true});  // node 1 taken in
  join(joiner(2, d2));
  const auto lines = record->all(3);
  INFO(fmt::format("{}", fmt::join(lines, "\n")));
  // Node 2 reaches node 1, now a layout node, by itself (layout/nodes): only node 1 is told,
  // before the coordinator hears of node 2 (the coordinator's record of node 1 may come late:
  // it runs on its own).
  REQUIRE(lines.size() == 3);
  CHECK(lines.back() == "coordinator hears node 2 joined");
  auto first_two = std::vector<std::string>(lines.begin(), lines.end() - 1);
  std::sort(first_two.begin(), first_two.end());
  CHECK(first_two == std::vector<std::string>{"coordinator hears node 1 joined", "node 1 connects to node 2"});
}

TEST_CASE("a node kept in the layout without a stage and lost is forgotten: the layout's nodes are published without it, and a later joiner is not sent to it") {
  caf::actor_system_config cfg;
  caf::actor_system system(cfg);
  auto record = std::make_shared<Record>();
  Reconnect reconnect = [](int, const std::vector<std::uint8_t>&) {};
  RelayoutLocal relayout_local = [](const Relayout&) { return NodeStages{0, {0}, {StageActor{}}, {}, {}}; };
  std::vector<std::vector<int>> published;
  std::mutex published_mutex;
  PublishLayoutNodes publish = [&](const std::vector<int>& nodes) {
    std::lock_guard lock(published_mutex);
    published.push_back(nodes);
  };
  auto directory = system.spawn(node_directory, 3, NodeStages{0, {0, 1, 2}, {StageActor{}, StageActor{}, StageActor{}}, {}, {}},
                                reconnect, RespawnLocal{}, RebuildEdges{}, PeerStop{}, nullptr, relayout_local,
                                std::string{}, publish);
  EndOnExit end{directory};
  caf::scoped_actor self(system);
  self->send(directory, coordinator_atom::value,
             caf::actor_cast<CoordinatorActor>(system.spawn(coordinator, record)));
  const auto move = [&](Relayout r) {
    bool ok = false;
    self->request(directory, caf::infinite, r)
        .receive([&](const LayoutActors&) { ok = true; }, [&](caf::error& e) { FAIL(system.render(e)); });
    REQUIRE(ok);
  };
  move(Relayout{1, {0}, 0, true});
  // Node 1 joins and the next move keeps it in the layout without a stage (as a shrink
  // onto fewer replicas leaves a node).
  auto d1 = system.spawn([record](caf::event_based_actor*) -> caf::behavior {
    return {[=](const PeerRejoined& peer) {
              record->add(fmt::format("node 1 connects to node {}", peer.node));
              return true;
            },
            [](const Relayout&) { return NodeStages{1, {}, {}, {}, {}}; }};
  });
  auto d2 = system.spawn(joiner_directory, 2, record);
  const auto join = [&](NodeStages stages) {
    bool taken = false;
    self->request(directory, caf::infinite, stages)
        .receive([&](bool ok) { taken = ok; }, [&](caf::error& e) { FAIL(system.render(e)); });
    CHECK(taken);
  };
  join(joiner(1, d1));
  move(Relayout{2, {0, 1}, 0, true});
  self->send(directory, forget_node_atom::value, 1);
  self->send(directory, forget_node_atom::value, 0);  // node 0 itself: never forgotten
  join(joiner(2, d2));
  const auto lines = record->all(2);
  INFO(fmt::format("{}", fmt::join(lines, "\n")));
  // Node 1 is not told of node 2: the directory forgot it before node 2 joined.
  CHECK(lines == std::vector<std::string>{"coordinator hears node 1 joined", "coordinator hears node 2 joined"});
  std::lock_guard lock(published_mutex);
  CHECK(published == std::vector<std::vector<int>>{{0}});
}
