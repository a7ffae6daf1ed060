// What a multi-process launch that cannot start does: one `error:` line naming what is
// wrong (the missing rank, the port in use, the differing key, the wrong token), exit 2,
// no run folder, and never a hang (every wait is bounded by rendezvous.timeout_s); and a
// node that dies or freezes mid-run fails the job within seconds (liveness heartbeats).
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

// Two nodes on a job long enough to be killed mid-run (2000 steps), which does not wait
// for a lost node's replacement (that is node_rejoin_test.cpp).
std::vector<NodeRun> long_two_node_job(const TempDir& dir) {
  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  std::vector<NodeRun> nodes;
  for (int n = 0; n < 2; ++n)
    nodes.push_back(NodeRun{tiny_job({"--set", "train.steps=2000", "--set", "rendezvous.timeout_s=10",
                                      "--set", "fault.rejoin_timeout_s=0",
                                      "--nnodes", "2", "--node-rank", std::to_string(n), "--rdzv",
                                      rdzv, "--out", dir / "run"}),
                            {}, {}});
  return nodes;
}

}  // namespace

TEST_CASE("a node that never joins fails node 0 after rendezvous.timeout_s naming rank 1") {
  TempDir dir;
  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  const auto r = run_conveyor(tiny_job({"--set", "rendezvous.timeout_s=1", "--nnodes", "2",
                                        "--node-rank", "0", "--rdzv", rdzv, "--out",
                                        dir / "run"}),
                              30);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("error: ") != std::string::npos);
  CHECK(r.err.find("rank 1") != std::string::npos);
  CHECK(r.seconds < 15);
  CHECK_FALSE(fs::exists(dir.path() / "run"));
}

TEST_CASE("a rendezvous port already in use is a clear error") {
  TempDir dir;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(fd, 1) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  const std::string rdzv = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  const auto r = run_conveyor(
      tiny_job({"--nnodes", "2", "--node-rank", "0", "--rdzv", rdzv, "--out", dir / "run"}), 30);
  ::close(fd);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("error: rendezvous " + rdzv) != std::string::npos);
  CHECK(r.err.find("Address already in use") != std::string::npos);
  CHECK(r.err.find("another job on this port?") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.path() / "run"));
}

TEST_CASE("an address this host does not have is a clear error without the port-in-use hint") {
  TempDir dir;
  // 192.0.2.0/24 is TEST-NET-1: never an address of this host.
  const auto r = run_conveyor(tiny_job({"--nnodes", "2", "--node-rank", "0", "--rdzv", "192.0.2.1:29517",
                                        "--token", "t", "--out", dir / "run"}),
                              30);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("error: rendezvous 192.0.2.1:29517 (flags): rendezvous: cannot listen on "
                   "192.0.2.1:29517: Cannot assign requested address (bind)") != std::string::npos);
  CHECK(r.err.find("another job") == std::string::npos);
  CHECK_FALSE(fs::exists(dir.path() / "run"));
}

TEST_CASE("a rendezvous server that accepts but never answers fails a node within about rendezvous.timeout_s") {
  TempDir dir;
  // Listening, never accepting: the kernel completes the TCP handshake, nothing replies.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(fd, 4) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  const std::string rdzv = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  const auto r = run_conveyor(tiny_job({"--set", "rendezvous.timeout_s=1", "--nnodes", "2", "--node-rank", "1",
                                        "--rdzv", rdzv, "--token", "t", "--out", dir / "run"}),
                              30);
  ::close(fd);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("no progress from " + rdzv + " while waiting for a reply") != std::string::npos);
  CHECK(r.seconds < 6);  // the reply's wait no longer adds a fixed 10 s
}

TEST_CASE("a node whose config differs stops the job at start naming the key and both values") {
  TempDir dir;
  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  std::vector<NodeRun> nodes;
  for (int n = 0; n < 2; ++n)
    nodes.push_back(NodeRun{tiny_job({"--set", "rendezvous.timeout_s=10", "--set",
                                      n == 0 ? "train.lr=0.003" : "train.lr=0.002", "--nnodes",
                                      "2", "--node-rank", std::to_string(n), "--rdzv", rdzv,
                                      "--out", dir / "run"}),
                            {}, {}});
  const auto results = run_nodes(dir, nodes, 60);
  for (const auto& r : results) {
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("error: node 1's config differs from node 0's") != std::string::npos);
    CHECK(r.err.find("train.lr is 0.002 on node 1, 0.003 on node 0") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(dir.path() / "run"));
}

TEST_CASE("a node with the wrong job token is refused") {
  TempDir dir;
  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  std::vector<NodeRun> nodes;
  for (int n = 0; n < 2; ++n)
    nodes.push_back(NodeRun{tiny_job({"--set", "rendezvous.timeout_s=3", "--nnodes", "2",
                                      "--node-rank", std::to_string(n), "--rdzv", rdzv, "--token",
                                      n == 0 ? "right" : "wrong", "--out", dir / "run"}),
                            {}, {}});
  const auto results = run_nodes(dir, nodes, 60);
  INFO("node 0: " << results[0].err << "\nnode 1: " << results[1].err);
  CHECK(results[1].exit_code == 2);
  CHECK(results[1].err.find("wrong job token") != std::string::npos);
  CHECK(results[0].exit_code == 2);
  CHECK(results[0].err.find("rank 1") != std::string::npos);
}

TEST_CASE("when node 0 dies mid-run the other node stops within seconds saying so") {
  TempDir dir;
  auto nodes = long_two_node_job(dir);
  nodes[0].kill_when_node0_says = "step 1/";  // training has started
  const auto start = std::chrono::steady_clock::now();
  const auto results = run_nodes(dir, nodes, 60);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO("node 1: " << results[1].err);
  CHECK(results[0].exit_code == 128 + SIGKILL);
  // Whichever notices first: the CAF connection (node 0 ended or became unreachable) or a
  // tensor in flight to node 0 (the stage fails naming the edge and node 0).
  CHECK(results[1].exit_code == 1);
  CHECK(results[1].err.find("node 0") != std::string::npos);
  CHECK(s < 20);
}

TEST_CASE("when a node dies mid-run node 0 stops naming a failed stage") {
  TempDir dir;
  auto nodes = long_two_node_job(dir);
  nodes[1].kill_when_node0_says = "step 1/";  // training has started
  const auto results = run_nodes(dir, nodes, 60);
  INFO("node 0: " << results[0].err);
  CHECK(results[0].exit_code == 1);
  CHECK(results[0].err.find("stage ") != std::string::npos);
  CHECK(results[0].err.find(" failed: ") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.path() / "run" / "weights.safetensors"));
}

TEST_CASE("a node that stops responding (frozen, sockets open) fails the job on node 0 within seconds") {
  TempDir dir;
  auto nodes = long_two_node_job(dir);
  // SIGSTOP: no connection breaks, so only the missing heartbeats can tell (within the
  // 5 s silence bound, far below transport.timeout_s's 60 s).
  nodes[1].kill_when_node0_says = "step 1/";
  nodes[1].kill_signal = SIGSTOP;
  const auto start = std::chrono::steady_clock::now();
  const auto results = run_nodes(dir, nodes, 60);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO("node 0: " << results[0].err);
  CHECK(results[0].exit_code == 1);
  CHECK(results[0].err.find("error: stages 2, 3 failed: node 1 stopped responding") != std::string::npos);
  CHECK(s < 30);
  CHECK_FALSE(fs::exists(dir.path() / "run" / "weights.safetensors"));
}
