// Where a stage sends the copies of its snapshots (stage_remote.hpp's copy_route): the
// leader's keeper from every other node, the standby's from the leader's own node (issue
// 44 item 7), nowhere without a standby.
#include <doctest/doctest.h>

#include <caf/all.hpp>

#include "actors/cluster/snapshot_keeper.hpp"
#include "actors/stage/stage_remote.hpp"

using namespace conveyor;

TEST_CASE("node 0's stages send their copies to the standby's keeper, every other node's to node 0's") {
  caf::actor_system_config cfg;
  caf::actor_system system{cfg};
  const auto links = std::make_shared<const CurrentLinks>(nullptr);
  auto store = std::make_shared<SnapshotStore>(3);
  auto leader = system.spawn(snapshot_keeper, store, links, nullptr, nullptr);
  auto standby = system.spawn(snapshot_keeper, store, links, nullptr, nullptr);
  const PeerTable peers{{}, leader, 0, standby, 1};

  const auto from0 = copy_route(peers, 0);
  CHECK(from0.keeper == standby);
  CHECK(from0.node == 1);
  for (int node : {1, 2}) {  // the standby's own stages too: to the leader
    const auto route = copy_route(peers, node);
    CHECK(route.keeper == leader);
    CHECK(route.node == 0);
  }

  // No standby (one other node lost and not replaced, or no buddy copies): node 0's stages
  // copy nowhere; the others still to node 0.
  const PeerTable alone{{}, leader, 0, {}, -1};
  CHECK_FALSE(copy_route(alone, 0).keeper);
  CHECK(copy_route(alone, 2).keeper == leader);
  // One process: no keeper at all.
  CHECK_FALSE(copy_route(PeerTable{}, 0).keeper);

  for (auto& k : {leader, standby}) caf::anon_send_exit(k, caf::exit_reason::user_shutdown);
}
