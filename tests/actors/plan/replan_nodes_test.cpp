// Issue 44: the nodes a re-plan counts (actors/plan/replan_nodes.hpp), idle ones among them.
#include <doctest/doctest.h>

#include "actors/plan/replan_nodes.hpp"

using namespace conveyor;

TEST_CASE("a shrink from 2 replicas × 2 stages onto nodes 0, 1, 2 leaves node 2 idle, and a grow seats it again") {
  // One replica of 2 stages on nodes 0 and 1: node 2 runs nothing but stays in the job.
  const std::vector<int> shrunk{0, 1};
  CHECK(idle_nodes({0, 1, 2}, shrunk) == std::set<int>{2});
  // Node 3 joins: the grow counts the idle node 2 with it, so the configured 4 nodes.
  CHECK(replan_nodes(shrunk, {2}, {3}, {}) == std::vector<int>{0, 1, 2, 3});
  // Node 1 lost for good instead: a shrink counts node 2 among the nodes present.
  CHECK(replan_nodes(shrunk, {2}, {}, {1}) == std::vector<int>{0, 2});
}

TEST_CASE("a node lost for good or awaited is never counted, idle or running a stage") {
  CHECK(replan_nodes({0, 0, 1, 1}, {2}, {}, {2}) == std::vector<int>{0, 1});
  CHECK(replan_nodes({0, 1, 2}, {}, {}, {2}) == std::vector<int>{0, 1});
  // A node that joined with the rank of a lost one is counted: it is a new process.
  CHECK(replan_nodes({0, 1}, {}, {2}, {}) == std::vector<int>{0, 1, 2});
}

TEST_CASE("a move that seats every node it names leaves none idle, and several stages of a node count once") {
  CHECK(idle_nodes({0, 1, 2}, {0, 1, 2, 0}).empty());
  CHECK(idle_nodes({0, 1, 2, 3}, {0, 0, 3}) == std::set<int>{1, 2});
  CHECK(replan_nodes({0, 0, 1, 1}, {}, {}, {}) == std::vector<int>{0, 1});
}
