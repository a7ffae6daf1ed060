// What nodes compare at the rendezvous: identical configs agree; a differing key is named
// with both values; different versions are named with both versions.
#include <doctest/doctest.h>

#include "apps/config/config_loader.hpp"
#include "apps/train/node_identity.hpp"
#include "kernels/common/error.hpp"

using namespace conveyor;

TEST_CASE("nodes with the same resolved config and build agree") {
  RunConfig c;
  const auto a = identity_of(c), b = identity_of(c);
  CHECK(a.config_hash.size() == 16);
  CHECK_FALSE(identity_mismatch(1, a, b));
  const auto back = NodeIdentity::from_json(a.to_json(), 1);
  CHECK(back.config_hash == a.config_hash);
  CHECK(back.config_yaml == a.config_yaml);
}

TEST_CASE("an identity that is not one names the node and its key") {
  for (const std::string bad : {"", "not json", "{\"conveyor\": 1}", "[1, 2]"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(NodeIdentity::from_json(bad, 3),
                         doctest::Contains("rendezvous: node 3's identity (key 'identity/3') is not readable"),
                         InputError);
  }
}

TEST_CASE("a differing config names each differing key with both values and both hashes") {
  RunConfig c0, c1;
  c1.train.steps = 5;
  c1.devices.ids = {0, 1};
  const auto a = identity_of(c1), b = identity_of(c0);
  const auto why = identity_mismatch(2, a, b);
  REQUIRE(why);
  CHECK(why->find("node 2's config differs from node 0's (hash " + a.config_hash + " vs " +
                  b.config_hash + ")") != std::string::npos);
  CHECK(why->find("train.steps is 5 on node 2, 200 on node 0") != std::string::npos);
  CHECK(why->find("devices.ids is [0, 1] on node 2, [] on node 0") != std::string::npos);
}

TEST_CASE("nodes with different peer silences do not start, naming rendezvous.peer_silence_s") {
  // Each node's liveness watch judges the others by its own value: they must agree.
  const auto a = identity_of(load_run_config("", {"rendezvous.peer_silence_s=2"}));
  const auto b = identity_of(load_run_config("", {}));
  const auto why = identity_mismatch(1, a, b);
  REQUIRE(why);
  CHECK(why->find("rendezvous.peer_silence_s is 2 on node 1, 5 on node 0") != std::string::npos);
}

TEST_CASE("nodes resuming from different checkpoints (or one not resuming) stop the job naming both") {
  RunConfig c;
  const auto a = identity_of(c, 10), b = identity_of(c, 5), none = identity_of(c);
  CHECK(NodeIdentity::from_json(a.to_json(), 1).resume_step == 10);
  CHECK_FALSE(identity_mismatch(1, a, identity_of(c, 10)));
  const auto why = identity_mismatch(1, a, b);
  REQUIRE(why);
  CHECK(*why == "node 1 resumes after step 10, node 0 resumes after step 5: give every node the "
                "same --resume");
  const auto fresh = identity_mismatch(3, none, b);
  REQUIRE(fresh);
  CHECK(fresh->find("node 3 starts from scratch, node 0 resumes after step 5") == 0);
}

TEST_CASE("a different protocol version stops the job naming both versions") {
  RunConfig c;
  auto a = identity_of(c);
  const auto b = identity_of(c);
  a.protocol_version = b.protocol_version + 1;
  const auto why = identity_mismatch(1, a, b);
  REQUIRE(why);
  CHECK(why->find("protocol " + std::to_string(a.protocol_version)) != std::string::npos);
  CHECK(why->find("protocol " + std::to_string(b.protocol_version)) != std::string::npos);
}

TEST_CASE("the multi-process keys reject bad values naming the key and what is allowed") {
  auto bad = [](const std::string& set) {
    try {
      load_run_config("configs/tiny.yaml", {set});
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(bad("transport.kind=tcp").find("transport.kind") != std::string::npos);
  CHECK(bad("transport.kind=tcp").find("auto, ucx") != std::string::npos);
  CHECK(bad("transport.timeout_s=0").find("transport.timeout_s") != std::string::npos);
  CHECK(bad("rendezvous.timeout_s=-1").find("rendezvous.timeout_s") != std::string::npos);
  CHECK(bad("devices.per_node=-1").find("devices.per_node") != std::string::npos);
  CHECK(bad("transport.kind=ucx").find("accepted") != std::string::npos);
}
