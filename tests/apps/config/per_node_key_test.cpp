// devices.per_node's description (config --keys, README) says what the node assignment
// (apps/launch/stages_of_node.hpp) accepts; it used to promise that with 0 "the last node
// takes the rest", where an uneven split is refused.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "apps/config/config_keys.hpp"
#include "apps/launch/stages_of_node.hpp"
#include "kernels/common/error.hpp"

using namespace conveyor;

TEST_CASE("devices.per_node's description says what the node assignment does: as even a share as possible at 0, else N each and the rest on the last node") {
  const ConfigKey* key = find_config_key("devices.per_node");
  REQUIRE(key != nullptr);
  CAPTURE(key->help);
  CHECK(key->help.find("stage actors (parallel.data × pipeline.stages) per node") != std::string::npos);
  // 0: as even a share as possible, the first nodes one more.
  CHECK(key->help.find("0 shares them as evenly as possible (the first nodes one more when they do "
                       "not divide: 6 on 4 nodes is 2, 2, 1, 1)") != std::string::npos);
  CHECK(stages_of_node(6, 2, 1, std::nullopt) == std::vector<int>{3, 4, 5});
  CHECK(stages_of_node(5, 2, 1, std::nullopt) == std::vector<int>{3, 4});
  // N > 0: N on every node but the last, which takes the rest, 1 to N of them.
  CHECK(key->help.find("N > 0 gives every node but the last N and the last the rest, which must be 1 to N") !=
        std::string::npos);
  CHECK(stages_of_node(5, 2, 0, 3) == std::vector<int>{0, 1, 2});
  CHECK(stages_of_node(5, 2, 1, 3) == std::vector<int>{3, 4});
  CHECK(stages_of_node(5, 2, 1, 4) == std::vector<int>{4});
  CHECK_THROWS_AS(stages_of_node(5, 2, 1, 2), InputError);  // the last would take 3 > N
  CHECK_THROWS_AS(stages_of_node(5, 2, 1, 5), InputError);  // the last would take none
}
