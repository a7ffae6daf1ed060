// Issue 44 item 7: the standby of a layout and the election by rank after the leader's
// loss (actors/plan/leader_election.hpp).
#include <doctest/doctest.h>

#include "actors/plan/leader_election.hpp"

using namespace conveyor;

TEST_CASE("node 1 stands by for node 0 and is elected when node 0 is lost") {
  CHECK(standby_of({0, 1, 2}, 0) == 1);
  CHECK(successor({0, 1, 2}, 0) == 1);
  const auto e = elect({0, 1, 2}, 0, {});
  CHECK(e.successor == 1);
  CHECK(e.refused.empty());
  // The order a layout lists its nodes in does not matter: every survivor elects alike.
  CHECK(successor({2, 0, 1}, 0) == 1);
  CHECK(standby_of({2, 1, 0}, 0) == 1);
}

TEST_CASE("once a re-plan dropped the standby, the next lowest node stands by and is elected") {
  // Node 1 lost for good, the job shrank onto nodes 0 and 2.
  CHECK(standby_of({0, 2}, 0) == 2);
  CHECK(elect({0, 2}, 0, {}).successor == 2);
  // Node 1 grew back: it stands by again.
  CHECK(standby_of({0, 1, 2}, 0) == 1);
  // A leader other than node 0 (after a takeover): the lowest other node still.
  CHECK(standby_of({1, 2, 3}, 1) == 2);
  CHECK(successor({1, 2, 3}, 1) == 2);
}

TEST_CASE("a standby lost at the same moment as the leader refuses the election, saying why") {
  // The layout still names node 1 (its loss is not re-planned yet): it was elected, but
  // its copies of node 0's stages went with it.
  const auto e = elect({0, 1, 2}, 0, {1});
  CHECK(e.successor == -1);
  CHECK(e.refused == "node 1, which stood by for node 0 with the copies of its stages' snapshots, is lost too: "
                     "no other node holds them");
  // Another node lost meanwhile does not matter: the standby leads.
  CHECK(elect({0, 1, 2, 3}, 0, {3}).successor == 1);
}

TEST_CASE("an idle node, kept in the job without a stage, stands by and is elected like any other") {
  // A shrink onto one replica of 2 stages on nodes 0 and 2 kept node 1 idle: the layout
  // (a Relayout's nodes) names it, so it is the standby.
  const std::vector<int> kept{0, 1, 2};
  CHECK(standby_of(kept, 0) == 1);
  CHECK(elect(kept, 0, {}).successor == 1);
  // Lost since, the move that forgot it no longer names it: node 2 stands by.
  CHECK(standby_of({0, 2}, 0) == 2);
}

TEST_CASE("a leader alone has no standby, and its loss elects no one") {
  CHECK(standby_of({0}, 0) == -1);
  CHECK(successor({0}, 0) == -1);
  const auto e = elect({0}, 0, {});
  CHECK(e.successor == -1);
  CHECK(e.refused == "node 0 led the job alone: no other node is left to take it over");
  CHECK(standby_of({}, 0) == -1);
}
