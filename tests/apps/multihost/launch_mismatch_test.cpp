// Processes of one job launched inconsistently (two with one --node-rank, different
// --nnodes, a job token on one side only, an IPv6 rendezvous): each such launch is named
// for what it is, on node 0 and on the node at fault, and ends with exit 2 within seconds
// instead of waiting out rendezvous.timeout_s.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

constexpr int kRendezvousTimeout = 20;  // what a launch that is not named would wait

std::vector<std::string> node_args(const TempDir& dir, const std::string& rdzv, int nnodes, int rank,
                                   const std::vector<std::string>& extra = {}) {
  auto args = tiny_job({"--set", "rendezvous.timeout_s=" + std::to_string(kRendezvousTimeout),
                        "--nnodes", std::to_string(nnodes), "--node-rank", std::to_string(rank),
                        "--rdzv", rdzv, "--out", dir / "run"});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("two processes started with one --node-rank stop the whole launch within seconds naming the rank and both addresses") {
  TempDir dir;
  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  // Four nodes expected; the process meant as node 2 was started as a second node 1 (and
  // node 3 not yet): the launch is wrong before the job is complete.
  const std::vector<NodeRun> nodes{{node_args(dir, rdzv, 4, 0), {}, {}},
                                   {node_args(dir, rdzv, 4, 1), {}, {}},
                                   {node_args(dir, rdzv, 4, 1), {}, {}}};
  const auto start = std::chrono::steady_clock::now();
  const auto results = run_nodes(dir, nodes, 60);
  const double s = seconds_since(start);
  for (std::size_t i = 0; i < results.size(); ++i) {
    INFO("node " << i << " stderr: " << results[i].err);
    CHECK(results[i].exit_code == 2);
    CHECK(results[i].err.find("error: rendezvous " + rdzv + " (flags): rendezvous: rank 1 joined twice: "
                              "first from 127.0.0.1:") != std::string::npos);
    CHECK(results[i].err.find(", again from 127.0.0.1:") != std::string::npos);
    CHECK(results[i].err.find("the job cannot start") != std::string::npos);
  }
  CHECK(s < kRendezvousTimeout / 2);
  CHECK_FALSE(fs::exists(dir.path() / "run"));
}

TEST_CASE("a second process with a running job's --node-rank is refused alone and the job goes on") {
  TempDir dir;
  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  const std::vector<std::string> long_job{"--set", "train.steps=2000"};
  std::vector<NodeRun> nodes{{node_args(dir, rdzv, 2, 0, long_job), {}, {}},
                             {node_args(dir, rdzv, 2, 1, long_job), {}, {}},
                             {node_args(dir, rdzv, 2, 1, long_job), {}, {}}};
  // The stray starts once the job trains (at most 30 s of waiting for that).
  nodes[2].wrapper = {"sh", "-c",
                      "f=$1; shift; for i in $(seq 600); do grep -q 'step 1/' \"$f\" && exec \"$@\"; "
                      "sleep 0.05; done; exit 99",
                      "sh", dir / "node0.err"};
  // Once node 0 has said so, an ordinary stop ends the job: it was still running.
  nodes[0].kill_when_node0_says = "rank 1 joined twice";
  nodes[0].kill_signal = SIGTERM;
  const auto results = run_nodes(dir, nodes, 30);
  INFO("node 0: " << results[0].err << "\nnode 1: " << results[1].err << "\nstray: " << results[2].err);
  CHECK(results[2].exit_code == 2);
  CHECK(results[2].err.find("rendezvous: rank 1 joined twice: first from 127.0.0.1:") != std::string::npos);
  CHECK(results[2].err.find("; refused: the job goes on without it") != std::string::npos);
  CHECK(results[0].err.find("conveyor: rendezvous: rank 1 joined twice: first from 127.0.0.1:") !=
        std::string::npos);
  CHECK(results[0].err.find("SIGTERM: stopped after step") != std::string::npos);
  CHECK(results[0].exit_code == 0);
  CHECK(results[1].exit_code == 0);
}

TEST_CASE("a node started with another --nnodes than node 0 stops both within seconds naming both values") {
  TempDir dir;
  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  // 4 stages divide over 2 nodes and over 4: node 1 gets as far as the rendezvous.
  const std::vector<NodeRun> nodes{{node_args(dir, rdzv, 2, 0), {}, {}},
                                   {node_args(dir, rdzv, 4, 1), {}, {}}};
  const auto start = std::chrono::steady_clock::now();
  const auto results = run_nodes(dir, nodes, 60);
  const double s = seconds_since(start);
  for (std::size_t i = 0; i < results.size(); ++i) {
    INFO("node " << i << " stderr: " << results[i].err);
    CHECK(results[i].exit_code == 2);
    CHECK(results[i].err.find("rank 1 was started with world size 4, rank 0 with world size 2") !=
          std::string::npos);
  }
  CHECK(s < kRendezvousTimeout / 2);
  CHECK_FALSE(fs::exists(dir.path() / "run"));
}

TEST_CASE("a node with a job token joining a node 0 without one is refused saying the tokens differ") {
  TempDir dir;
  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  const std::vector<NodeRun> nodes{
      {node_args(dir, rdzv, 2, 0, {"--set", "rendezvous.timeout_s=3"}), {}, {}},
      {node_args(dir, rdzv, 2, 1, {"--set", "rendezvous.timeout_s=3", "--token", "only-node-1-has-it"}), {}, {}}};
  const auto results = run_nodes(dir, nodes, 60);
  INFO("node 0: " << results[0].err << "\nnode 1: " << results[1].err);
  CHECK(results[1].exit_code == 2);
  CHECK(results[1].err.find("refused: the job tokens differ: this process has a job token, the "
                            "rendezvous server has none") != std::string::npos);
  // Node 0 goes on waiting for a node with its token (a stranger must not stop a job),
  // then names the refusal with the missing rank.
  CHECK(results[0].exit_code == 2);
  CHECK(results[0].err.find("the job tokens differ: the client has a job token, the server has none") !=
        std::string::npos);
  CHECK(results[0].err.find("rank 1") != std::string::npos);
  for (const auto& r : results) CHECK(r.err.find("only-node-1-has-it") == std::string::npos);
  CHECK_FALSE(fs::exists(dir.path() / "run"));
}

TEST_CASE("an IPv6 rendezvous address is written in brackets in every message") {
  // A port on ::1 that nothing listens on.
  const auto port = free_ipv6_port();
  if (!port) {
    MESSAGE("skipped: no IPv6 loopback (::1) in this sandbox");
    return;
  }
  TempDir dir;
  const std::string rdzv = "[::1]:" + std::to_string(*port);
  const auto r = run_conveyor(tiny_job({"--set", "rendezvous.timeout_s=1", "--nnodes", "2", "--node-rank",
                                        "1", "--rdzv", rdzv, "--token", "t", "--out", dir / "run"}),
                              30);
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("error: rendezvous " + rdzv + " (flags): rendezvous: cannot reach " + rdzv +
                   " within 1 s") != std::string::npos);
  CHECK(r.err.find(":::") == std::string::npos);
}

TEST_CASE("two nodes over an IPv6 rendezvous train, and no message writes an address without brackets") {
  const auto port = free_ipv6_port();
  if (!port) {
    MESSAGE("skipped: no IPv6 loopback (::1) in this sandbox");
    return;
  }
  TempDir dir;
  const std::string rdzv = "[::1]:" + std::to_string(*port);
  // Node k reaches node 0's actors at the caf/0 address it read from the store, written
  // [::1]:PORT: the form every message shows must also be the one that connects.
  const std::vector<NodeRun> nodes{{node_args(dir, rdzv, 2, 0, {"--token", "t"}), {}, {}},
                                   {node_args(dir, rdzv, 2, 1, {"--token", "t"}), {}, {}}};
  const auto results = run_nodes(dir, nodes, 60);
  require_all_ok(results);
  for (const auto& r : results) {
    CHECK(r.err.find("rendezvous " + rdzv) != std::string::npos);
    CHECK(r.err.find(" ::1:") == std::string::npos);
  }
}
