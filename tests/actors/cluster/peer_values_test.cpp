// Values peers publish in the rendezvous store are parsed strictly: what another program
// or version could have left there is an error naming the key, never a wrapped port.
#include <doctest/doctest.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "actors/cluster/peer_values.hpp"

using namespace conveyor;

TEST_CASE("node 0's epoch parses as nanoseconds, and nothing else does") {
  CHECK(parse_peer_epoch("0") == 0);
  CHECK(parse_peer_epoch("1733222400123456789") == 1733222400123456789LL);
  for (const std::string bad : {"", "abc", "12x", " 12", "-5", "1e9", "99999999999999999999"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(parse_peer_epoch(bad), doctest::Contains("rendezvous key 'epoch'"),
                         std::runtime_error);
  }
}

TEST_CASE("a node's CAF endpoint parses as HOST:PORT with a port that fits") {
  const auto v4 = parse_peer_endpoint("10.0.0.7:40123", 2);
  CHECK(v4.host == "10.0.0.7");
  CHECK(v4.port == 40123);
  const auto name = parse_peer_endpoint("node-a.cluster:1", 1);
  CHECK(name.host == "node-a.cluster");
  CHECK(name.port == 1);
  CHECK(parse_peer_endpoint("::1:4000", 1).host == "::1");
  const auto bracketed = parse_peer_endpoint("[fe80::1]:65535", 1);
  CHECK(bracketed.host == "fe80::1");
  CHECK(bracketed.port == 65535);

  const auto error = [](const std::string& text) {
    try {
      parse_peer_endpoint(text, 3);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error("10.0.0.7:70000").find("rendezvous key 'caf/3' (node 3's actors) holds '10.0.0.7:70000': "
                                     "the port is not a number in 1..65535") != std::string::npos);
  CHECK(error("10.0.0.7:0").find("1..65535") != std::string::npos);
  CHECK(error("10.0.0.7:-1").find("1..65535") != std::string::npos);
  CHECK(error("10.0.0.7:").find("1..65535") != std::string::npos);
  CHECK(error("10.0.0.7:80a").find("1..65535") != std::string::npos);
  CHECK(error("10.0.0.7").find("not HOST:PORT") != std::string::npos);
  CHECK(error(":4000").find("not HOST:PORT") != std::string::npos);
  CHECK(error("[fe80::1:4000").find("unclosed") != std::string::npos);
  CHECK(error(std::string(500, 'x')).find("...") != std::string::npos);
}

TEST_CASE("the running layout's nodes print as node 0 writes them and parse back, and anything else is an error naming the key") {
  CHECK(layout_nodes_text({0, 2}) == "0,2");
  CHECK(parse_layout_nodes("0,2") == std::vector<int>{0, 2});
  CHECK(parse_layout_nodes("0") == std::vector<int>{0});
  CHECK(parse_layout_nodes(layout_nodes_text({0, 1, 5})) == std::vector<int>{0, 1, 5});
  for (const std::string bad : {"", ",", "0,", ",1", "0,,1", "1,0", "0,0", "0, 1", "a", "-1"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(parse_layout_nodes(bad), doctest::Contains("rendezvous key 'layout/nodes'"),
                         std::runtime_error);
  }
}

TEST_CASE("a process joining a shrunk job dials node 0 and the layout's nodes, not the nodes lost for good") {
  const std::optional<std::vector<int>> shrunk = std::vector<int>{0, 3};
  CHECK(joiner_dials(shrunk, 0));
  CHECK(joiner_dials(shrunk, 3));
  CHECK_FALSE(joiner_dials(shrunk, 1));
  CHECK_FALSE(joiner_dials(shrunk, 2));
  CHECK(joiner_dials(std::vector<int>{1}, 0));  // node 0 hosts the store and the coordinator
  for (int node : {0, 1, 2}) CHECK(joiner_dials(std::nullopt, node));  // the layout the job started with
}

TEST_CASE("the standby's address prints as GENERATION NODE HOST:PORT and parses back, and anything else is an error naming the key") {
  const StandbyAddress at{3, 1, {"10.0.0.2", 4321}};
  CHECK(standby_text(at) == "3 1 10.0.0.2:4321");
  const auto back = parse_standby(standby_text(at));
  CHECK(back.generation == 3);
  CHECK(back.node == 1);
  CHECK(back.store.host == "10.0.0.2");
  CHECK(back.store.port == 4321);
  CHECK(parse_standby(standby_text({0, 2, {"::1", 80}})).store.host == "::1");
  for (const std::string bad : {"", "1", "1 2", "x 1 h:1", "1 0 h:1", "1 1 h", "1 1 h:0", "-1 1 h:1", "1 1 [::1:5"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(parse_standby(bad), doctest::Contains("rendezvous key 'standby'"), std::runtime_error);
  }
}
