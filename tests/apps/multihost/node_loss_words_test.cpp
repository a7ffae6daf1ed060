// What the processes of a job say when one of them freezes: words naming the node and its
// stages, never CAF's own codes (exit_reason(kill), exit_reason(user_shutdown),
// system_error(request_receiver_down)), which told a user nothing. A frozen node that was
// declared lost rejoins as its own replacement when it runs again.
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

TEST_CASE("a node frozen until node 0 took its stages away says so in words, and rejoins as its own replacement") {
  TempDir dir;
  const std::string rdzv = "127.0.0.1:" + std::to_string(free_port());
  const std::vector<std::string> job = tiny_job({"--set", "train.steps=30", "--set", "rendezvous.timeout_s=20",
                                                 "--set", "fault.rejoin_timeout_s=60", "--set",
                                                 "rendezvous.peer_silence_s=2"});
  const std::string& want = one_process_weights(dir, job);
  std::vector<NodeRun> nodes;
  for (int n = 0; n < 2; ++n) {
    auto args = job;
    args.insert(args.end(), {"--nnodes", "2", "--node-rank", std::to_string(n), "--rdzv", rdzv, "--out", dir / "run"});
    nodes.push_back(NodeRun{args, {}, {}});
  }
  // Frozen past the 2 s silence that makes node 0 declare it lost and end its stages,
  // then running again while node 0 waits for a replacement: it becomes that replacement.
  // Before: node 1 exited 1, and node 0 waited out fault.rejoin_timeout_s for nobody.
  nodes[1].kill_when_node0_says = "step 3/";
  nodes[1].kill_signal = SIGSTOP;
  nodes[1].continue_after = std::chrono::milliseconds(3500);
  const auto results = run_nodes(dir, nodes, 90);
  INFO("node 0: " << results[0].err);
  INFO("node 1: " << results[1].err);
  CHECK(results[0].exit_code == 0);
  CHECK(results[1].exit_code == 0);
  // Before: "error: stage 2 failed: exit_reason(kill)". Now node 1 hears it from node 0's
  // mark in the store, with the job's own silence bound (not a fixed 5 s).
  CHECK(results[1].err.find("node 0 declared this process (rank 1) lost: it did not run or answer for more "
                            "than 2000 ms") != std::string::npos);
  CHECK(results[0].err.find("stages 2, 3 failed: node 1 stopped responding") != std::string::npos);
  CHECK(results[1].err.find("rejoins the job as its own replacement") != std::string::npos);
  CHECK(results[1].err.find("this process replaces the lost node") != std::string::npos);
  CHECK(results[0].err.find("recovered from a lost process") != std::string::npos);
  CHECK_FALSE(has_caf_code(results[0].err));
  CHECK_FALSE(has_caf_code(results[1].err));
  CHECK_MESSAGE(read_text(dir.path() / "run" / "weights.safetensors") == want,
                "weights differ from the run without the fault");
}
