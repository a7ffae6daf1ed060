// Stages go to nodes in contiguous ranges; a split that cannot work is an InputError.
#include "apps/launch/stages_of_node.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "tests/apps/launch/launch_test_support.hpp"

using namespace conveyor;
using namespace conveyor::launch_test;
using Stages = std::vector<int>;

TEST_CASE("stages split evenly into contiguous ranges with node 0 first") {
  CHECK(stages_of_node(8, 4, 0, std::nullopt) == Stages{0, 1});
  CHECK(stages_of_node(8, 4, 3, std::nullopt) == Stages{6, 7});
  CHECK(stages_of_node(4, 1, 0, std::nullopt) == Stages{0, 1, 2, 3});
  CHECK(stages_of_node(3, 3, 1, std::nullopt) == Stages{1});
}

TEST_CASE("stages that do not divide go as evenly as possible, the first nodes one more") {
  // 6 stages on 4 nodes: no devices.per_node splits them (2 leaves node 3 none, 1 holds 4).
  const std::vector<Stages> want{{0, 1}, {2, 3}, {4}, {5}};
  for (int n = 0; n < 4; ++n) CHECK(stages_of_node(6, 4, n, std::nullopt) == want[n]);
  CHECK(stages_of_node(7, 3, 0, std::nullopt) == Stages{0, 1, 2});
  CHECK(stages_of_node(7, 3, 1, std::nullopt) == Stages{3, 4});
  CHECK(stages_of_node(7, 3, 2, std::nullopt) == Stages{5, 6});
  // Every split covers every stage once, and no two nodes differ by more than one.
  for (int stages = 1; stages <= 12; ++stages)
    for (int nnodes = 1; nnodes <= stages; ++nnodes) {
      Stages all;
      std::size_t fewest = 99, most = 0;
      for (int n = 0; n < nnodes; ++n) {
        const auto mine = stages_of_node(stages, nnodes, n, std::nullopt);
        fewest = std::min(fewest, mine.size());
        most = std::max(most, mine.size());
        all.insert(all.end(), mine.begin(), mine.end());
      }
      INFO("stages " << stages << ", nnodes " << nnodes);
      CHECK(most - fewest <= 1);
      REQUIRE(all.size() == static_cast<std::size_t>(stages));
      for (int s = 0; s < stages; ++s) CHECK(all[s] == s);
    }
}

TEST_CASE("stages per node given: the last node takes what is left") {
  CHECK(stages_of_node(7, 2, 0, 4) == Stages{0, 1, 2, 3});
  CHECK(stages_of_node(7, 2, 1, 4) == Stages{4, 5, 6});
  CHECK(stages_of_node(8, 2, 1, 4) == Stages{4, 5, 6, 7});
  // Every node's ranges together are every stage exactly once.
  for (auto [stages, per] : {std::pair{10, std::optional<int>(4)}, std::pair{9, std::optional<int>()}}) {
    Stages all;
    for (int n = 0; n < 3; ++n)
      for (int s : stages_of_node(stages, 3, n, per)) all.push_back(s);
    CHECK(all.size() == static_cast<std::size_t>(stages));
    for (int s = 0; s < static_cast<int>(all.size()); ++s) CHECK(all[s] == s);
  }
}

TEST_CASE("the devices.per_node values an error offers are exactly those that split the stages") {
  for (int stages = 2; stages <= 12; ++stages)
    for (int nnodes = 2; nnodes <= stages; ++nnodes) {
      std::vector<int> works;  // found by trying every value on every node
      for (int per = 1; per <= stages; ++per) {
        try {
          for (int n = 0; n < nnodes; ++n) stages_of_node(stages, nnodes, n, per);
          works.push_back(per);
        } catch (const InputError&) {
        }
      }
      INFO("stages " << stages << ", nnodes " << nnodes);
      if (works.empty()) {  // e.g. 4 stages on 3 nodes
        check_message(input_error([&] { stages_of_node(stages, nnodes, 0, stages); }),
                      {"no devices.per_node > 0 splits them", "devices.per_node 0 shares them"});
        continue;
      }
      CHECK(works.back() - works.front() + 1 == static_cast<int>(works.size()));  // one range
      const std::string offer = works.size() == 1 ? std::to_string(works.front())
                                                  : std::to_string(works.front()) + " to " + std::to_string(works.back());
      const int refused = works.front() - 1 >= 1 ? works.front() - 1 : works.back() + 1;
      check_message(input_error([&] { stages_of_node(stages, nnodes, 0, refused); }),
                    {"devices.per_node " + offer + " splits them", "or devices.per_node 0 shares them"});
    }
}

TEST_CASE("a split of stages over nodes that cannot work is an error naming the numbers") {
  const auto error = [](int stages, int nnodes, int rank, std::optional<int> per) {
    return input_error([&] { stages_of_node(stages, nnodes, rank, per); });
  };
  check_message(error(6, 4, 0, 2),
                {"pipeline.stages=6 on 4 nodes with 2 stages per node", "node 3 would get no stage",
                 "no devices.per_node > 0 splits them"});
  check_message(error(2, 4, 0, std::nullopt), {"pipeline.stages=2 on 4 nodes", "at least one stage"});
  check_message(error(7, 2, 0, 3), {"3 stages per node", "only 6 stages", "devices.per_node 4 to 6 splits them"});
  check_message(error(7, 3, 0, 4), {"4 stages per node", "node 2 would get no stage", "devices.per_node 3 splits them"});
  check_message(error(4, 2, 0, 0), {"stages per node must be at least 1"});
  check_message(error(4, 2, 2, std::nullopt), {"node rank 2", "from 0 to 1"});
  check_message(error(4, 2, -1, std::nullopt), {"node rank -1"});
  check_message(error(0, 1, 0, std::nullopt), {"pipeline.stages=0"});
  check_message(error(4, 0, 0, std::nullopt), {"nnodes=0"});
}
