// Two "hosts" on one machine: network namespaces joined by a veth pair (10.x.0.1 and
// 10.x.0.2), UCX over TCP only, the rendezvous bound to node 0's veth address. Same
// equality as on loopback. Needs root and `ip netns`; elsewhere prints why it skipped.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

int sh(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()); }

// Two namespaces and the veth pair between them; removed (with the pair) on destruction.
struct VethPair {
  std::string a, b, subnet;
  std::string why_not;  // empty when set up
  VethPair() {
    const auto id = std::to_string(::getpid() % 200 + 20);
    a = "cvA" + id;
    b = "cvB" + id;
    subnet = "10.211." + id;
    if (::geteuid() != 0) {
      why_not = "needs root to create network namespaces";
      return;
    }
    if (sh("ip netns list") != 0) {
      why_not = "the ip command (iproute2) with netns support is missing";
      return;
    }
    const std::string steps[] = {
        "ip netns add " + a,
        "ip netns add " + b,
        "ip link add " + a + "v type veth peer name " + b + "v",
        "ip link set " + a + "v netns " + a,
        "ip link set " + b + "v netns " + b,
        "ip -n " + a + " addr add " + subnet + ".1/24 dev " + a + "v",
        "ip -n " + b + " addr add " + subnet + ".2/24 dev " + b + "v",
        "ip -n " + a + " link set " + a + "v up",
        "ip -n " + b + " link set " + b + "v up",
        "ip -n " + a + " link set lo up",
        "ip -n " + b + " link set lo up"};
    for (const auto& s : steps)
      if (sh(s) != 0) {
        why_not = "this machine does not allow '" + s + "'";
        return;
      }
  }
  ~VethPair() {
    sh("ip netns del " + a);
    sh("ip netns del " + b);
  }
};

}  // namespace

TEST_CASE("two hosts in network namespaces over a veth pair train to the one-process weights") {
  VethPair net;
  if (!net.why_not.empty()) {
    MESSAGE("skipped: " << net.why_not);
    return;
  }
  TempDir dir;
  auto one = tiny_job({"--out", dir / "one"});
  one.erase(one.begin());
  train_ok(one, 120);

  const std::string rdzv = net.subnet + ".1:29500";  // a fresh namespace: every port is free
  std::vector<NodeRun> nodes;
  for (int n = 0; n < 2; ++n)
    nodes.push_back(NodeRun{tiny_job({"--nnodes", "2", "--node-rank", std::to_string(n), "--rdzv",
                                      rdzv, "--token", "veth", "--out", dir / "run"}),
                            {{"UCX_TLS", "tcp"}},
                            {"ip", "netns", "exec", n == 0 ? net.a : net.b}});
  const auto results = run_nodes(dir, nodes);
  require_all_ok(results);
  CHECK(results[1].err.find("reached at " + net.subnet + ".2") != std::string::npos);
  CHECK(read_text(dir.path() / "run" / "weights.safetensors") ==
        read_text(dir.path() / "one" / "weights.safetensors"));
}
