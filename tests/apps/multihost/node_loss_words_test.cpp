// What the processes of a job say when one of them freezes: words naming the node and its
// stages, never CAF's own codes (exit_reason(kill), exit_reason(user_shutdown),
// system_error(request_receiver_down)), which told a user nothing.
#include <doctest/doctest.h>
#include <signal.h>

#include "tests/apps/multihost/multihost_support.hpp"

using namespace conveyor::testing;

namespace {

bool has_caf_code(const std::string& text) {
  for (const char* code : {"exit_reason(", "system_error(", "request_receiver_down", "user_shutdown"})
    if (text.find(code) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("a node frozen until node 0 took its stages away says so in words when it comes back") {
  TempDir dir;
  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  std::vector<NodeRun> nodes;
  for (int n = 0; n < 2; ++n)
    nodes.push_back(NodeRun{tiny_job({"--set", "train.steps=2000", "--set", "rendezvous.timeout_s=10",
                                      "--set", "fault.rejoin_timeout_s=3", "--set",
                                      "rendezvous.peer_silence_s=2", "--nnodes", "2",
                                      "--node-rank", std::to_string(n), "--rdzv", rdzv, "--out",
                                      dir / "run"}),
                            {}, {}});
  // Frozen past the 2 s silence that makes node 0 declare it lost and end its stages,
  // then running again while node 0 still waits for a replacement (3 s).
  nodes[1].kill_when_node0_says = "step 1/";
  nodes[1].kill_signal = SIGSTOP;
  nodes[1].continue_after = std::chrono::milliseconds(3500);
  const auto results = run_nodes(dir, nodes, 60);
  INFO("node 0: " << results[0].err);
  INFO("node 1: " << results[1].err);
  CHECK(results[0].exit_code == 1);
  CHECK(results[0].err.find("error: stages 2, 3 failed: node 1 stopped responding") != std::string::npos);
  CHECK(results[1].exit_code == 1);
  // Before: "error: stage 2 failed: exit_reason(kill)".
  CHECK(results[1].err.find("node 0 ended it to replace it") != std::string::npos);
  // The job's own silence bound, not a fixed 5 s.
  CHECK(results[1].err.find("stopped answering (for 2 s:") != std::string::npos);
  CHECK(results[1].err.find("node 1 (stages 2-3)") != std::string::npos);
  CHECK_FALSE(has_caf_code(results[0].err));
  CHECK_FALSE(has_caf_code(results[1].err));
}
