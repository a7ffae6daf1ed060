// Node 0's directory names the standby's keeper with the layout's actors (issue 44 item 7,
// node_directory.hpp): at start from the NodeStages that carried one, after a Relayout
// from the new layout's answers (node 1 lost: node 2 stands by), and none when no node of
// the layout answered with a keeper. In one process: the other nodes' directories are
// stand-ins that answer the forwarded Relayout.
#include <doctest/doctest.h>

#include <caf/all.hpp>

#include "actors/cluster/node_directory.hpp"
#include "actors/cluster/snapshot_keeper.hpp"

using namespace conveyor;

namespace {

// Node `node`'s directory: answers a forwarded Relayout with rank `rank`, naming `keeper`.
caf::behavior answering_directory(caf::event_based_actor*, int node, int rank, KeeperActor keeper) {
  return {[=](const Relayout&) { return NodeStages{node, {rank}, {StageActor{}}, {}, {}, keeper}; }};
}

}  // namespace

TEST_CASE("node 0's directory names the standby's keeper with the layout's actors, and again after a move") {
  caf::actor_system_config cfg;
  caf::actor_system system{cfg};
  auto store = std::make_shared<SnapshotStore>(3);
  const auto links = std::make_shared<const CurrentLinks>(nullptr);
  auto keeper1 = system.spawn(snapshot_keeper, store, links, nullptr, nullptr);
  auto keeper2 = system.spawn(snapshot_keeper, store, links, nullptr, nullptr);
  RelayoutLocal relayout_local = [](const Relayout&) { return NodeStages{0, {0}, {StageActor{}}, {}, {}}; };
  auto directory = system.spawn(node_directory, 3, NodeStages{0, {0}, {StageActor{}}, {}, {}}, Reconnect{},
                                RespawnLocal{}, RebuildEdges{}, PeerStop{}, nullptr, relayout_local, std::string{},
                                PublishLayoutNodes{});
  auto d1 = system.spawn(answering_directory, 1, 1, KeeperActor{});
  auto d2 = system.spawn(answering_directory, 2, 1, keeper2);
  caf::scoped_actor self{system};
  const auto announce = [&](NodeStages stages) {
    self->request(directory, caf::infinite, stages)
        .receive([](bool) {}, [&](caf::error& e) { FAIL(system.render(e)); });
  };
  announce(NodeStages{1, {1}, {StageActor{}}, d1, {}, keeper1});  // node 1 stands by
  announce(NodeStages{2, {2}, {StageActor{}}, d2, {}, {}});
  LayoutActors start;
  self->request(directory, caf::infinite, stages_atom::value)
      .receive([&](LayoutActors& all) { start = std::move(all); }, [&](caf::error& e) { FAIL(system.render(e)); });
  CHECK(start.stages.size() == 3);
  CHECK(start.standby_node == 1);
  CHECK(start.standby_keeper == keeper1);

  const auto move = [&](Relayout r) {
    LayoutActors moved;
    self->request(directory, caf::infinite, r)
        .receive([&](LayoutActors& all) { moved = std::move(all); }, [&](caf::error& e) { FAIL(system.render(e)); });
    return moved;
  };
  // Node 1 lost for good: the shrink onto nodes 0 and 2, where node 2 stands by.
  const auto shrunk = move(Relayout{1, {0, 2}, 0, true});
  CHECK(shrunk.stages.size() == 2);
  CHECK(shrunk.standby_node == 2);
  CHECK(shrunk.standby_keeper == keeper2);
  // Node 0 alone: no standby.
  const auto alone = move(Relayout{2, {0}, 0, true});
  CHECK(alone.stages.size() == 1);
  CHECK(alone.standby_node == -1);
  CHECK_FALSE(alone.standby_keeper);

  for (auto& a : {directory, d1, d2}) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  for (auto& k : {keeper1, keeper2}) caf::anon_send_exit(k, caf::exit_reason::user_shutdown);
}
