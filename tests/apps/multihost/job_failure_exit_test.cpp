// A job over processes that fails fails on every node. Node 0's coordinator ends every
// stage when the job fails, as it does when the job ends well; a node that holds only
// stages used to see the same "shut down" either way, print "node 1 done" and exit 0 while
// node 0 exited 1, so a launcher (Slurm, torchrun, a script's wait) counted it a success.
#include <doctest/doctest.h>
#include <signal.h>

#include <chrono>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

std::vector<NodeRun> nodes_of(const TempDir& dir, int nnodes, const std::vector<std::string>& extra) {
  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  std::vector<NodeRun> nodes;
  for (int n = 0; n < nnodes; ++n) {
    auto args = tiny_job({"--set", "train.steps=200", "--set", "rendezvous.timeout_s=20"});
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--nnodes", std::to_string(nnodes), "--node-rank", std::to_string(n), "--rdzv",
                             rdzv, "--out", (dir.path() / "run").string()});
    nodes.push_back(NodeRun{args, {{"CONVEYOR_TOKEN", "job-failure-test"}}, {}});
  }
  return nodes;
}

}  // namespace

TEST_CASE("a stage crash that fails the job on node 0 fails node 1 too, with node 0's reason") {
  TempDir dir;
  const auto nodes =
      nodes_of(dir, 2, {"--set", "fault.policy=abort", "--set", "fault.inject=[crash:stage=0:step=3]"});
  const auto results = run_nodes(dir, nodes, 60);
  INFO("node 0: " << results[0].err << "\nnode 1: " << results[1].err);
  REQUIRE_FALSE(results[0].timed_out);
  REQUIRE_FALSE(results[1].timed_out);
  CHECK(results[0].exit_code == 1);
  CHECK(results[1].exit_code == 1);
  CHECK(results[1].err.find("node 1 done") == std::string::npos);
  CHECK(results[1].err.find("because the job failed there") != std::string::npos);
  CHECK(results[1].err.find("injected crash at the start of step 3") != std::string::npos);
}

TEST_CASE("the middle node of 3 fails when node 2 is killed, whichever of it and node 0 notices first") {
  TempDir dir;
  auto nodes = nodes_of(dir, 3, {"--set", "pipeline.stages=3", "--set", "model.layers=3", "--set", "fault.policy=abort"});
  nodes[2].kill_when_node0_says = "step 10/";  // training has started
  const auto results = run_nodes(dir, nodes, 60);
  INFO("node 0: " << results[0].err << "\nnode 1: " << results[1].err);
  REQUIRE_FALSE(results[1].timed_out);
  CHECK(results[0].exit_code == 1);
  CHECK(results[1].exit_code == 1);
  CHECK(results[1].err.find("node 1 done") == std::string::npos);
}

TEST_CASE("a frozen node of 2 replicas fails node 0 within seconds, not after the gradient all-reduce's timeout") {
  // Node 0's replica waits in a Gloo bucket for node 1's, whose sockets stay open while it
  // is frozen: the bucket fails only after transport.timeout_s (60 s). The job fails once
  // node 1 was silent 5 s and fault.rejoin_timeout_s (2 s) passed; node 0 used to exit only
  // when the bucket gave up, 64 s after the start.
  TempDir dir;
  // fault.shrink never: with it node 0 would go on as one replica (replica_shrink_test.cpp).
  auto nodes = nodes_of(dir, 2, {"--set", "pipeline.stages=2", "--set", "parallel.data=2", "--set",
                                 "fault.rejoin_timeout_s=2", "--set", "transport.timeout_s=60", "--set",
                                 "fault.shrink=never"});
  nodes[1].kill_when_node0_says = "step 10/";
  nodes[1].kill_signal = SIGSTOP;
  const auto start = std::chrono::steady_clock::now();
  const auto results = run_nodes(dir, nodes, 120);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO("node 0: " << results[0].err);
  REQUIRE_FALSE(results[0].timed_out);
  CHECK(results[0].exit_code == 1);
  CHECK(results[0].err.find("node 1 stopped responding") != std::string::npos);
  CHECK(s < 35);
}
