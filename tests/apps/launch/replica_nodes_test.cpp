// Data-parallel stage actors go to nodes replica-major in contiguous ranges; a split that
// cannot work is an InputError naming parallel.data and pipeline.stages.
#include "apps/launch/replica_nodes.hpp"

#include <doctest/doctest.h>

#include <vector>

#include "apps/launch/stages_of_node.hpp"
#include "tests/apps/launch/launch_test_support.hpp"

using namespace conveyor;
using namespace conveyor::launch_test;
using Nodes = std::vector<int>;

TEST_CASE("2 replicas of 2 stages on 2 nodes: node 0 runs replica 0, node 1 replica 1") {
  const ReplicaLayout layout{2, 2};
  const auto nodes = node_of_actor(layout, 2, std::nullopt);
  CHECK(nodes == Nodes{0, 0, 1, 1});
  CHECK(nodes_of_replica(nodes, layout, 0) == Nodes{0});
  CHECK(nodes_of_replica(nodes, layout, 1) == Nodes{1});
}

TEST_CASE("replicas that do not fit one node each span processes, in actor order") {
  const ReplicaLayout two_by_two{2, 2};
  const auto four = node_of_actor(two_by_two, 4, std::nullopt);
  CHECK(four == Nodes{0, 1, 2, 3});
  CHECK(nodes_of_replica(four, two_by_two, 1) == Nodes{2, 3});
  const ReplicaLayout three_by_two{3, 2};
  const auto two = node_of_actor(three_by_two, 2, std::nullopt);
  CHECK(two == Nodes{0, 0, 0, 1, 1, 1});
  CHECK(nodes_of_replica(two, three_by_two, 0) == Nodes{0});
  CHECK(nodes_of_replica(two, three_by_two, 1) == Nodes{0, 1});
  CHECK(nodes_of_replica(two, three_by_two, 2) == Nodes{1});
}

TEST_CASE("one replica is the pipeline's split of its stages, stages per node included") {
  for (int nnodes : {1, 2, 4}) {
    const auto nodes = node_of_actor(ReplicaLayout{1, 8}, nnodes, std::nullopt);
    for (int n = 0; n < nnodes; ++n)
      for (int s : stages_of_node(8, nnodes, n, std::nullopt)) CHECK(nodes.at(s) == n);
  }
  CHECK(node_of_actor(ReplicaLayout{1, 7}, 2, 4) == Nodes{0, 0, 0, 0, 1, 1, 1});
  CHECK(node_of_actor(ReplicaLayout{2, 3}, 2, 4) == Nodes{0, 0, 0, 0, 1, 1});
}

TEST_CASE("stage actors that do not divide over the nodes go as evenly as possible, in actor order") {
  CHECK(node_of_actor(ReplicaLayout{3, 1}, 2, std::nullopt) == Nodes{0, 0, 1});
  CHECK(node_of_actor(ReplicaLayout{1, 6}, 4, std::nullopt) == Nodes{0, 0, 1, 1, 2, 3});
  CHECK(node_of_actor(ReplicaLayout{2, 3}, 4, std::nullopt) == Nodes{0, 0, 1, 1, 2, 3});
}

TEST_CASE("stage actors that cannot split over the nodes are an error naming the keys") {
  const auto error = [](ReplicaLayout layout, int nnodes, std::optional<int> per) {
    return input_error([&] { node_of_actor(layout, nnodes, per); });
  };
  check_message(error({3, 1}, 2, 1),
                {"parallel.data=3 × pipeline.stages=1 = 3 stages on 2 nodes with 1 stages per node",
                 "devices.per_node 2 splits them"});
  check_message(error({2, 1}, 4, std::nullopt), {"parallel.data=2", "at least one stage"});
  check_message(error({1, 6}, 4, 2), {"pipeline.stages=6 on 4 nodes", "node 3 would get no stage"});
  check_message(error({2, 2}, 0, std::nullopt), {"nnodes=0"});
}
